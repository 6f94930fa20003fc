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
 * A throwaway MariaDB server for the tests, as server/internal/testsupport/mysqltest starts one
 * for the Go tests: mariadb-install-db into a temporary directory, mariadbd on
 * a free loopback port, killed and deleted at the end. Needs mariadbd and
 * mariadb-install-db (Debian: apt-get install mariadb-server); a missing
 * binary fails the test. As root the server runs as the "mysql" user.
 */
final class MariaServer implements DatabaseServer {
    private final Path dir;
    final int port;
    private final Process proc;
    private final AtomicInteger dbs = new AtomicInteger();

    private MariaServer(Path dir, int port, Process proc) {
        this.dir = dir;
        this.port = port;
        this.proc = proc;
    }

    static String binary(String... names) {
        for (String name : names) {
            for (String d : (System.getenv("PATH") + ":/usr/sbin:/usr/bin").split(":")) {
                File f = new File(d, name);
                if (f.canExecute()) {
                    return f.getPath();
                }
            }
        }
        throw new AssertionError(String.join(" or ", names) + " not found on PATH, /usr/sbin or /usr/bin: install MariaDB (apt-get install mariadb-server)");
    }

    private static boolean root() {
        return "root".equals(System.getProperty("user.name"));
    }

    private static List<String> as(String... cmd) {
        List<String> l = new ArrayList<>();
        if (root()) {
            l.addAll(List.of("setpriv", "--reuid=mysql", "--regid=mysql", "--init-groups", "--"));
        }
        l.addAll(List.of(cmd));
        return l;
    }

    static MariaServer start() throws Exception {
        String server = binary("mariadbd", "mysqld");
        String install = binary("mariadb-install-db", "mysql_install_db");
        Path dir = Files.createTempDirectory("mysqltest-java-");
        if (root()) {
            run(List.of("chown", "mysql:mysql", dir.toString()));
        }
        Path data = dir.resolve("data");
        // "normal" root authentication: root logs in without a password, over TCP too.
        run(as(install, "--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"));
        for (int attempt = 0; ; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress("127.0.0.1", 0));
                port = s.getLocalPort();
            }
            Path log = dir.resolve("server-" + attempt + ".log");
            Process p = new ProcessBuilder(as(server, "--no-defaults", "--datadir=" + data,
                    "--socket=" + dir.resolve("mysqld.sock"), "--pid-file=" + dir.resolve("mysqld.pid"),
                    "--port=" + port, "--bind-address=127.0.0.1", "--skip-name-resolve", "--max-connections=100",
                    // a disposable fixture: durability is worthless here
                    "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--innodb-buffer-pool-size=64M",
                    "--performance-schema=OFF"))
                    .redirectErrorStream(true).redirectOutput(log.toFile()).start();
            MariaServer s = new MariaServer(dir, port, p);
            long end = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
            while (true) {
                try (Connection c = DriverManager.getConnection(s.url("mysql"))) {
                    return s;
                } catch (SQLException e) {
                    if (!p.isAlive()) {
                        String l = Files.readString(log);
                        if ((l.contains("Can't start server") || l.contains("already in use")) && attempt < 4) {
                            break;
                        }
                        s.deleteDir();
                        throw new AssertionError("mariadbd exited during startup:\n" + l);
                    }
                    if (System.nanoTime() > end) {
                        s.close();
                        throw new AssertionError("mariadbd did not accept connections within a minute:\n" + Files.readString(log));
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

    String url(String db) {
        return "jdbc:mariadb://127.0.0.1:" + port + "/" + db + "?user=root";
    }

    public String newDatabase() throws SQLException {
        String name = "fence" + dbs.incrementAndGet();
        try (Connection c = DriverManager.getConnection(url("mysql")); Statement st = c.createStatement()) {
            st.execute("CREATE DATABASE " + name);
        }
        return url(name);
    }

    @Override
    public void close() throws Exception {
        proc.destroyForcibly();
        proc.waitFor(30, TimeUnit.SECONDS);
        deleteDir();
    }

    private void deleteDir() throws IOException {
        try (Stream<Path> w = Files.walk(dir)) {
            w.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
