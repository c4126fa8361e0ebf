// attnd.mjs - what the OpenAPI tests share: a live attnd on an ephemeral loopback port.
import { spawn } from 'node:child_process';

// Starts bin on 127.0.0.1:0 and resolves with {proc, base} once its log has named the port and
// said ready (15 s at most; it listens before it loads its models and answers 503 not_ready until
// then); rejects if it exits first.
export function startAttnd(bin) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, ['--listen', '127.0.0.1:0', '--log-format', 'text'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error(`attnd did not report its port:\n${log}`)), 15000);
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/listening address=127\.0\.0\.1:(\d+)/);
      if (m && /^\S+ info ready$/m.test(log)) {
        clearTimeout(timer);
        resolve({ proc: p, base: `http://127.0.0.1:${m[1]}` });
      }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`attnd exited ${code}:\n${log}`)); });
  });
}
