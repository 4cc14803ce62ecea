// Many `server` URLs for one API server: plain TCP forwarders in the bench process, each on its own
// loopback port, each piping every connection to the API server's host and port. TLS passes through
// untouched, end to end between the service and the API server, so a client verifies the API
// server's own certificate (issued for 127.0.0.1, whatever the port) and the API server sees the
// client's own credentials. Hub mode keys a served cluster by its server URL: N forwarders give N
// clusters that are one API server (issue 25, "many cluster Secrets may point at one API server").
import net from 'node:net';

export interface Forwarder {
  port: number;
  /** https://127.0.0.1:<port> */
  url: string;
}

export interface Forwarders {
  list: Forwarder[];
  /** Connections accepted so far, over all forwarders. */
  connections(): number;
  close(): Promise<void>;
}

/** The host and port of an https URL (brackets of an IPv6 literal removed). */
export function hostPort(server: string): { host: string; port: number } {
  const u = new URL(server);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return { host, port: u.port ? Number(u.port) : u.protocol === 'http:' ? 80 : 443 };
}

/** Starts `count` forwarders to `target`, each listening on a free port of 127.0.0.1. */
export async function startForwarders(
  target: { host: string; port: number },
  count: number,
): Promise<Forwarders> {
  const servers: net.Server[] = [];
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const list: Forwarder[] = [];
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  const close = async () => {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
  };
  try {
    for (let i = 0; i < count; i++) {
      const srv = net.createServer((client) => {
        accepted++;
        const upstream = net.connect(target.port, target.host);
        track(client);
        track(upstream);
        client.setNoDelay(true);
        upstream.setNoDelay(true);
        // Either side ending or failing ends both.
        const end = () => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', end).on('close', end);
        upstream.on('error', end).on('close', end);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      servers.push(srv);
      const port = await new Promise<number>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', () => {
          const a = srv.address();
          if (typeof a === 'object' && a) resolve(a.port);
          else reject(new Error('forwarder has no port'));
        });
      });
      list.push({ port, url: `https://127.0.0.1:${port}` });
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { list, connections: () => accepted, close };
}
