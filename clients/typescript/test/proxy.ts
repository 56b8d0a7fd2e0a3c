// A killable TCP proxy: forwards to the service, and cuts one connection's sockets when told,
// which is what a network drop looks like to the client.

import { createServer, connect, type Server, type Socket } from "node:net";

export class KillableProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** Connections accepted so far. */
  connections = 0;
  /**
   * cutWhen, when set, is shown every chunk the service sends on a connection; returning true
   * drops that chunk and the connection (both sides), and clears cutWhen.
   */
  cutWhen: ((chunk: string) => boolean) | undefined;
  /** How many connections were dropped. */
  cuts = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(target: URL): Promise<{ proxy: KillableProxy; url: string }> {
    let proxy!: KillableProxy;
    const server = createServer((client) => {
      proxy.connections++;
      const upstream = connect(Number(target.port), target.hostname);
      proxy.#sockets.add(client).add(upstream);
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("close", () => proxy.#sockets.delete(client)).on("error", close);
      upstream.on("close", () => proxy.#sockets.delete(upstream)).on("error", close);
      client.pipe(upstream);
      upstream.on("data", (chunk: Buffer) => {
        const cut = proxy.cutWhen;
        if (cut && cut(chunk.toString("utf8"))) {
          proxy.cutWhen = undefined;
          proxy.cuts++;
          close();
          return;
        }
        client.write(chunk);
      });
      upstream.on("end", () => client.end());
    });
    proxy = new KillableProxy(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const addr = server.address();
    if (addr === null || typeof addr === "string") throw new Error("proxy: no address");
    return { proxy, url: `http://127.0.0.1:${addr.port}${target.pathname.replace(/\/$/, "")}` };
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
