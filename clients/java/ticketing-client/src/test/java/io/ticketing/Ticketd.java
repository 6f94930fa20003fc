package io.ticketing;

import io.ticketing.wire.Codec;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Real ticketd processes for the integration tests: a cluster of n nodes on
 * free loopback ports, each with its own data directory, built from this
 * repository. The binary is $TICKETD_BIN (clients/java/test.sh builds it);
 * without it the helper builds it with "go build ./server/cmd/ticketd" once.
 */
final class Ticketd implements AutoCloseable {
    static final class Node {
        final String id;
        final String addr;
        final String raftAddr;
        final Path dir;
        List<String> cmd;
        Process proc;

        Node(String id, String addr, String raftAddr, Path dir) {
            this.id = id;
            this.addr = addr;
            this.raftAddr = raftAddr;
            this.dir = dir;
        }
    }

    private static Path binary;
    final List<Node> nodes = new ArrayList<>();
    private final Path root;
    private String token = ""; // the hello token, when the nodes require one

    static synchronized Path binary() throws Exception {
        if (binary != null) {
            return binary;
        }
        String env = System.getenv("TICKETD_BIN");
        if (env != null && !env.isEmpty()) {
            binary = Path.of(env);
            if (!Files.isExecutable(binary)) {
                throw new AssertionError("TICKETD_BIN=" + env + " is not an executable file; build it with: go build -o <path> ./server/cmd/ticketd");
            }
            return binary;
        }
        Path repo = Path.of(System.getProperty("ticketing.repo.root", "../../..")).toAbsolutePath().normalize();
        Path out = Path.of("target", "ticketd").toAbsolutePath();
        Process p = new ProcessBuilder("go", "build", "-o", out.toString(), "./server/cmd/ticketd")
                .directory(repo.toFile()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(5, TimeUnit.MINUTES) || p.exitValue() != 0) {
            throw new AssertionError("TICKETD_BIN is not set and \"go build ./server/cmd/ticketd\" in " + repo + " failed (install Go, or set TICKETD_BIN): " + log);
        }
        binary = out;
        return binary;
    }

    /** Every port freePort has handed out in this JVM: two servers of one cluster given one port never form it. */
    private static final Set<Integer> HANDED_OUT = new HashSet<>();

    /**
     * A port that was free a moment ago, never handed out before in this JVM, and below the kernel's ephemeral
     * range (32768 and up on Linux): a port 0 listener gets an ephemeral port, which any outgoing connection may
     * take the moment it is free.
     */
    static int freePort() throws IOException {
        for (int i = 0; i < 1000; i++) {
            int port = java.util.concurrent.ThreadLocalRandom.current().nextInt(10000, 32768);
            synchronized (HANDED_OUT) {
                if (HANDED_OUT.contains(port)) {
                    continue;
                }
            }
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", port));
            } catch (IOException inUse) {
                continue;
            }
            synchronized (HANDED_OUT) {
                if (HANDED_OUT.add(port)) {
                    return port;
                }
            }
        }
        throw new IOException("no free port below 32768 in 1000 tries that was not handed out before");
    }

    /** Starts n voters that bootstrap one cluster; extra flags go to every node. */
    Ticketd(int n, String... extra) throws Exception {
        root = Files.createTempDirectory("ticketd-java-");
        for (int i = 0; i + 1 < extra.length; i++) {
            if (extra[i].equals("-client-token")) {
                token = extra[i + 1];
            }
        }
        StringBuilder boot = new StringBuilder();
        for (int i = 1; i <= n; i++) {
            Node nd = new Node("n" + i, "127.0.0.1:" + freePort(), "127.0.0.1:" + freePort(), root.resolve("n" + i));
            Files.createDirectories(nd.dir);
            nodes.add(nd);
            boot.append(boot.length() > 0 ? "," : "").append(nd.id).append('=').append(nd.raftAddr);
        }
        // The servers prove a cluster secret to each other, made by ticketd's own generator.
        Path secret = root.resolve("raft-secret");
        newRaftSecret(secret);
        for (Node nd : nodes) {
            List<String> cmd = new ArrayList<>(List.of(binary().toString(),
                    "-node-id", nd.id, "-listen", nd.addr, "-raft-listen", nd.raftAddr, "-http-listen", "",
                    "-data-dir", nd.dir.resolve("data").toString(), "-bootstrap", boot.toString(),
                    "-raft-secret-file", secret.toString(), "-log-level", "warn"));
            cmd.addAll(List.of(extra));
            nd.cmd = cmd;
            nd.proc = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(nd.dir.resolve("log.txt").toFile()).start();
        }
    }

    /** The hello token the leader probe uses (a principal's token, on a server with principals). */
    Ticketd probeToken(String t) {
        token = t;
        return this;
    }

    /** Writes a fresh cluster secret to file with "ticketd new-raft-secret", as docs/deployment.md says. */
    static void newRaftSecret(Path file) throws Exception {
        Process p = new ProcessBuilder(binary().toString(), "new-raft-secret", file.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new AssertionError("ticketd new-raft-secret failed: " + out);
        }
    }

    /** token_sha256 of a principal, made by "ticketd hash-token" as docs/deployment.md says. */
    static String hashToken(String tok) throws Exception {
        Process p = new ProcessBuilder(binary().toString(), "hash-token").start();
        p.getOutputStream().write((tok + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0 || !out.matches("[0-9a-f]{64}")) {
            throw new AssertionError("ticketd hash-token failed: " + out + new String(p.getErrorStream().readAllBytes()));
        }
        return out;
    }

    /** Comma-separated client addresses of the nodes still running. */
    String addrs() {
        return String.join(",", nodes.stream().map(x -> x.addr).toList());
    }

    /** Waits for a node that answers a hello as the leader, with a deadline. */
    Node awaitLeader(long timeoutMs) throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (System.nanoTime() < end) {
            for (Node nd : nodes) {
                if (nd.proc.isAlive() && isLeader(nd, token)) {
                    return nd;
                }
            }
            Thread.sleep(50);
        }
        StringBuilder logs = new StringBuilder();
        for (Node nd : nodes) {
            logs.append("\n--- ").append(nd.id).append(nd.proc.isAlive() ? "" : " (exited " + nd.proc.exitValue() + ")").append(":\n")
                    .append(Files.exists(nd.dir.resolve("log.txt")) ? Files.readString(nd.dir.resolve("log.txt")) : "");
        }
        throw new AssertionError("no ticketd became leader within " + timeoutMs + " ms" + logs);
    }

    private static boolean isLeader(Node nd, String token) {
        String[] hp = nd.addr.split(":");
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 500);
            s.setSoTimeout(1000);
            Frame h = new Frame(Type.HELLO);
            h.version = 1;
            h.text = token.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            s.getOutputStream().write(Codec.encode(h));
            InputStream in = s.getInputStream();
            Frame f = Codec.read(in);
            return f.type == Type.READY && (f.flags & Type.READY_LEADER) != 0;
        } catch (Exception e) {
            return false;
        }
    }

    /**
     * The cluster's ID as a running node reports it in its hello answer (an
     * admin hello that asks for it), waiting with a deadline until one has it.
     */
    String clusterId(long timeoutMs) throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (System.nanoTime() < end) {
            for (Node nd : nodes) {
                if (!nd.proc.isAlive()) {
                    continue;
                }
                String[] hp = nd.addr.split(":");
                try (Socket s = new Socket()) {
                    s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 500);
                    s.setSoTimeout(1000);
                    Frame h = new Frame(Type.HELLO);
                    h.version = 1;
                    h.flags = Type.HELLO_ADMIN | Type.HELLO_CLUSTER_ID;
                    h.text = token.getBytes(java.nio.charset.StandardCharsets.UTF_8);
                    s.getOutputStream().write(Codec.encode(h));
                    Frame f = Codec.read(s.getInputStream());
                    if (f.type == Type.READY && (f.flags & Type.READY_CLUSTER_ID) != 0 && !ClusterPin.format(f.clusterId).equals("none")) {
                        return ClusterPin.format(f.clusterId);
                    }
                } catch (Exception e) {
                    // not up yet: ask again
                }
            }
            Thread.sleep(50);
        }
        throw new AssertionError("no node reported a cluster ID within " + timeoutMs + " ms");
    }

    /**
     * SIGTERM, as an operator stops a server for a planned restart: waits
     * for it to exit and returns its exit code.
     */
    int stop(Node nd) throws InterruptedException {
        nd.proc.destroy();
        if (!nd.proc.waitFor(30, TimeUnit.SECONDS)) {
            throw new AssertionError(nd.id + " did not exit within 30 s of SIGTERM");
        }
        return nd.proc.exitValue();
    }

    /** Starts a stopped node again, on its data directory and addresses; its log goes on in the same file. */
    void restart(Node nd) throws IOException {
        nd.proc = new ProcessBuilder(nd.cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(nd.dir.resolve("log.txt").toFile())).start();
    }

    /** SIGKILL: no shutdown, no leadership hand-over. */
    void kill(Node nd) throws InterruptedException {
        nd.proc.destroyForcibly();
        nd.proc.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws IOException {
        for (Node nd : nodes) {
            if (nd.proc != null) {
                nd.proc.destroyForcibly();
            }
        }
        for (Node nd : nodes) {
            try {
                if (nd.proc != null) {
                    nd.proc.waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (!Files.exists(root)) {
            return; // closed before
        }
        try (Stream<Path> w = Files.walk(root)) {
            w.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
