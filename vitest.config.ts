import { defineConfig } from 'vitest/config';
import { fastLaneTestFiles } from './scripts/test-lanes.js';

const ALL = ['test/**/*.test.ts'];
const fast = fastLaneTestFiles(import.meta.dirname);
const shared = { testTimeout: 60_000, hookTimeout: 120_000 };

// `vitest run` runs both projects (CI: scripts/test-all.sh); `npm test` only the fast one.
export default defineConfig({
  test: {
    projects: [
      { test: { ...shared, name: 'fast', include: fast } },
      { test: { ...shared, name: 'real', include: ALL, exclude: fast } },
    ],
  },
});
