// Container health check of a `qtsp serve` instance: GET /health/ready on its operations listener (plain
// HTTP, ops.port), 0 when it answers 200. Readiness, not liveness: an instance that cannot sign now is taken
// out of rotation, and the body names why.
import { request } from 'node:http';

const port = Number(process.env.QTSP_OPS_PORT ?? 8438);
const req = request({ host: '127.0.0.1', port, path: '/health/ready', method: 'GET', timeout: 2500 }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', () => process.exit(1));
req.end();
