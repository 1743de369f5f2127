// Writes a seed directory of N ACL shoots x C CIDRs for measuring `render` as a command, e.g.
//   npx tsx bench/generate-seed.ts /tmp/seed-1000x50 1000 50
//   /usr/bin/time -v npx tsx src/cli/main.ts render /tmp/seed-1000x50 > /tmp/out.yaml
import { writeGeneratedSeed } from '../test/support/generated-seed.js';

const [dir, shoots = '1000', cidrs = '50'] = process.argv.slice(2);
if (!dir) {
  process.stderr.write('usage: npx tsx bench/generate-seed.ts DIR [shoots=1000] [cidrs=50]\n');
  process.exitCode = 2;
} else {
  await writeGeneratedSeed(dir, Number(shoots), Number(cidrs));
  process.stderr.write(`wrote ${shoots} ACL shoots x ${cidrs} CIDRs to ${dir}\n`);
}
