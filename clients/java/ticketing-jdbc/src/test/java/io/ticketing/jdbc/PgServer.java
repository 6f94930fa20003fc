package io.ticketing.jdbc;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * A throwaway PostgreSQL server for the tests, as server/internal/testsupport/pgtest starts one
 * for the Go tests: initdb into a temporary directory, postgres on a free
 * loopback port, stopped (SIGQUIT, immediate shutdown) and deleted at the
 * end. Needs the PostgreSQL 15 server binaries on PATH or in
 * /usr/lib/postgresql/15/bin (Debian: apt-get install postgresql-15); a
 * missing binary fails the test, never skips it. PostgreSQL refuses to run as
 * root, so as root the server runs as the "postgres" user (setpriv).
 */
public final class PgServer implements DatabaseServer {
    private final Path dir;
    public final int port;
    private final Process proc;
    private final AtomicInteger dbs = new AtomicInteger();

    private PgServer(Path dir, int port, Process proc) {
        this.dir = dir;
        this.port = port;
        this.proc = proc;
    }

    static String binary(String name) {
        for (String d : (System.getenv("PATH") + ":/usr/lib/postgresql/15/bin").split(":")) {
            File f = new File(d, name);
            if (f.canExecute()) {
                return f.getPath();
            }
        }
        throw new AssertionError(name + " (PostgreSQL 15 server) not found on PATH or in /usr/lib/postgresql/15/bin: "
                + "install it (apt-get install postgresql-15)");
    }

    private static boolean root() {
        return "root".equals(System.getProperty("user.name"));
    }

    private static List<String> as(String... cmd) {
        List<String> l = new ArrayList<>();
        if (root()) {
            l.addAll(List.of("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"));
        }
        l.addAll(List.of(cmd));
        return l;
    }

    public static PgServer start() throws Exception {
        String initdb = binary("initdb");
        String postgres = binary("postgres");
        Path dir = Files.createTempDirectory("pgtest-java-");
        if (root()) {
            run(List.of("chown", "postgres:postgres", dir.toString()));
        }
        Path data = dir.resolve("data");
        run(as(initdb, "-D", data.toString(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"));
        for (int attempt = 0; ; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", 0));
                port = s.getLocalPort();
            }
            Path log = dir.resolve("postgres-" + attempt + ".log");
            Process p = new ProcessBuilder(as(postgres, "-D", data.toString(), "-p", String.valueOf(port),
                    "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
                    // a disposable fixture: durability is worthless here
                    "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100"))
                    .redirectErrorStream(true).redirectOutput(log.toFile()).start();
            PgServer s = new PgServer(dir, port, p);
            long end = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
            while (true) {
                try (Connection c = DriverManager.getConnection(s.url("postgres"))) {
                    return s;
                } catch (SQLException e) {
                    if (!p.isAlive()) {
                        String l = Files.readString(log);
                        if ((l.contains("could not bind") || l.contains("already in use")) && attempt < 4) {
                            break; // the port was taken meanwhile: another one
                        }
                        s.deleteDir();
                        throw new AssertionError("postgres exited during startup:\n" + l);
                    }
                    if (System.nanoTime() > end) {
                        s.close();
                        throw new AssertionError("postgres did not accept connections within a minute:\n" + Files.readString(log));
                    }
                    Thread.sleep(20);
                }
            }
        }
    }

    private static void run(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(2, TimeUnit.MINUTES) || p.exitValue() != 0) {
            throw new AssertionError(String.join(" ", cmd) + " failed:\n" + out);
        }
    }

    public String url(String db) {
        return "jdbc:postgresql://127.0.0.1:" + port + "/" + db + "?user=postgres&sslmode=disable";
    }

    /** A fresh database; returns its JDBC URL. */
    public String newDatabase() throws SQLException {
        String name = "fence" + dbs.incrementAndGet();
        try (Connection c = DriverManager.getConnection(url("postgres")); Statement st = c.createStatement()) {
            st.execute("CREATE DATABASE " + name);
        }
        return url(name);
    }

    @Override
    public void close() throws Exception {
        // SIGQUIT: postgres's immediate shutdown (it takes its children down too).
        new ProcessBuilder("kill", "-QUIT", String.valueOf(proc.pid())).start().waitFor(10, TimeUnit.SECONDS);
        if (!proc.waitFor(30, TimeUnit.SECONDS)) {
            proc.destroyForcibly();
        }
        deleteDir();
    }

    private void deleteDir() throws IOException {
        try (Stream<Path> w = Files.walk(dir)) {
            w.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
