// Webhook metrics named like controller-runtime's, so existing dashboards and alerts apply.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface WebhookMetrics {
  /** Starts timing one request; the returned function records its outcome. */
  begin(webhook: string): (code: number) => void;
  certificateRead(ok: boolean): void;
}

export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const registers = [registry];
  const total = new Counter({ name: 'controller_runtime_webhook_requests_total', help: 'Total admission requests by webhook and HTTP/admission status code', labelNames: ['webhook', 'code'] as const, registers });
  const latency = new Histogram({
    name: 'controller_runtime_webhook_latency_seconds',
    help: 'Time to answer an admission request',
    labelNames: ['webhook'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const inFlight = new Gauge({ name: 'controller_runtime_webhook_requests_in_flight', help: 'Admission requests being served', labelNames: ['webhook'] as const, registers });
  const certReads = new Counter({ name: 'certwatcher_read_certificate_total', help: 'Serving certificate reads', registers });
  const certErrors = new Counter({ name: 'certwatcher_read_certificate_errors_total', help: 'Serving certificate reads that failed', registers });
  return {
    begin(webhook) {
      inFlight.inc({ webhook });
      const end = latency.startTimer({ webhook });
      return (code) => {
        end();
        inFlight.dec({ webhook });
        total.inc({ webhook, code: String(code) });
      };
    },
    certificateRead(ok) {
      certReads.inc();
      if (!ok) certErrors.inc();
    },
  };
}
