package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The Java runner of the language-neutral conformance suite
 * (testdata/conformance/README.md): every scenario file is served by the
 * scripted fake server, started as a process ($FAKETICKETD_BIN, which
 * clients/java/test.sh builds; without it the runner builds it once with
 * "go build ./internal/faketicketd/cmd/faketicketd"), and driven through this
 * client. The Go and C# runners drive their clients through the same files.
 */
class ConformanceTest {
    static final Duration PATIENCE = Duration.ofSeconds(20);

    static Path repo() {
        return Path.of(System.getProperty("ticketing.repo.root", "../../..")).toAbsolutePath().normalize();
    }

    /** The scenarios' directory; TICKETING_CONFORMANCE overrides it (a scenario broken on purpose, say). */
    static Path dir() {
        String env = System.getenv("TICKETING_CONFORMANCE");
        return env != null && !env.isEmpty() ? Path.of(env) : repo().resolve("testdata/conformance");
    }

    static Path binary;

    static synchronized Path fakeBinary() throws Exception {
        if (binary != null) {
            return binary;
        }
        String env = System.getenv("FAKETICKETD_BIN");
        if (env != null && !env.isEmpty()) {
            binary = Path.of(env);
            if (!Files.isExecutable(binary)) {
                throw new AssertionError("FAKETICKETD_BIN=" + env + " is not an executable file; build it with: go build -o <path> ./internal/faketicketd/cmd/faketicketd");
            }
            return binary;
        }
        Path out = Path.of("target", "faketicketd").toAbsolutePath();
        Process p = new ProcessBuilder("go", "build", "-o", out.toString(), "./internal/faketicketd/cmd/faketicketd")
                .directory(repo().toFile()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new AssertionError("FAKETICKETD_BIN is not set and \"go build ./internal/faketicketd/cmd/faketicketd\" in " + repo() + " failed (install Go, or set FAKETICKETD_BIN): " + log);
        }
        binary = out;
        return binary;
    }

    /** How many scenarios run at once: most of a scenario's time is waiting (the Go runner does the same). */
    static final int PARALLEL = 8;

    @TestFactory
    Stream<DynamicTest> scenarios() throws IOException {
        return runAll(dir(), "conformance scenario", ConformanceTest::run);
    }

    /** One scenario file's run (a runner's). */
    interface ScenarioRun {
        void run(Path scenario) throws Exception;
    }

    /**
     * Every scenario of dir run with run, PARALLEL at a time on threads
     * named thread, each reported as its own test (the coordination runner's
     * too).
     */
    static Stream<DynamicTest> runAll(Path dir, String thread, ScenarioRun run) throws IOException {
        List<Path> files;
        try (Stream<Path> s = Files.list(dir)) {
            files = s.filter(p -> p.toString().endsWith(".json")).sorted().toList();
        }
        if (files.isEmpty()) {
            fail("no scenarios in " + dir);
        }
        // Every scenario starts at once (PARALLEL at a time); each test reports its own.
        ExecutorService pool = Executors.newFixedThreadPool(PARALLEL, r -> {
            Thread t = new Thread(r, thread);
            t.setDaemon(true);
            return t;
        });
        Map<Path, Future<?>> runs = new java.util.HashMap<>();
        for (Path p : files) {
            runs.put(p, pool.submit(() -> {
                run.run(p);
                return null;
            }));
        }
        pool.shutdown();
        return files.stream().map(p -> DynamicTest.dynamicTest(p.getFileName().toString().replace(".json", ""), () -> {
            try {
                runs.get(p).get();
            } catch (ExecutionException e) {
                throw e.getCause();
            }
        }));
    }

    /** The fake server process of one scenario: its address, the frames it received, its verdict. */
    static final class Fake implements AutoCloseable {
        final Process process;
        final OutputStream in;
        final List<String> received = new ArrayList<>();
        String addr;
        String verdict;
        String violations;

        Fake(Path scenario) throws Exception {
            process = new ProcessBuilder(fakeBinary().toString(), scenario.toString())
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            in = process.getOutputStream();
            Thread reader = new Thread(this::readLines, "faketicketd output");
            reader.setDaemon(true);
            reader.start();
            synchronized (this) {
                long end = System.nanoTime() + PATIENCE.toNanos();
                while (addr == null && process.isAlive() && System.nanoTime() < end) {
                    wait(100);
                }
            }
            assertNotNull(addr, "faketicketd printed no address for " + scenario);
        }

        void readLines() {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (this) {
                        if (line.startsWith("addr ")) {
                            addr = line.substring(5);
                        } else if (line.startsWith("recv ")) {
                            received.add(line.substring(5));
                        } else if (line.startsWith("verdict ")) {
                            verdict = line.substring(8);
                        } else if (line.startsWith("violations")) {
                            violations = line.substring(10).trim();
                        }
                        notifyAll();
                    }
                }
            } catch (IOException e) {
                // the process ended
            }
        }

        /** Waits until count frames of this type have arrived; false after the bound. */
        synchronized boolean awaitFrame(String type, Duration bound, int count) throws InterruptedException {
            long end = System.nanoTime() + bound.toNanos();
            while (received.stream().filter(type::equals).count() < count) {
                long left = end - System.nanoTime();
                if (left <= 0 || !process.isAlive()) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
            return true;
        }

        /** What the script found wrong so far, for a failed step's message ("" when nothing). */
        String violations() throws Exception {
            synchronized (this) {
                violations = null;
            }
            in.write("violations\n".getBytes(StandardCharsets.UTF_8));
            in.flush();
            synchronized (this) {
                long end = System.nanoTime() + PATIENCE.toNanos();
                while (violations == null && process.isAlive() && System.nanoTime() < end) {
                    wait(100);
                }
                return violations == null || violations.isEmpty() ? "" : "\nthe server saw: " + violations;
            }
        }

        String check() throws Exception {
            in.write("check\n".getBytes(StandardCharsets.UTF_8));
            in.flush();
            synchronized (this) {
                long end = System.nanoTime() + PATIENCE.toNanos();
                while (verdict == null && process.isAlive() && System.nanoTime() < end) {
                    wait(100);
                }
                return verdict;
            }
        }

        @Override
        public void close() throws Exception {
            in.close();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }

    static String errorClass(Throwable e) {
        if (e instanceof IndeterminateException) return "indeterminate";
        if (e instanceof CapacityException) return "capacity";
        if (e instanceof NotAcquiredException) return "not_acquired";
        if (e instanceof NotHeldAfterRetryException) return "not_held_after_retry";
        if (e instanceof NotHeldException) return "not_held";
        if (e instanceof BudgetExceededException) return "budget_exceeded";
        if (e instanceof UnauthenticatedException) return "unauthenticated";
        if (e instanceof PermissionDeniedException) return "permission_denied";
        if (e instanceof InvalidArgumentException) return "invalid_argument";
        if (e instanceof ClosedException) return "closed";
        if (e instanceof CancellationException) return "cancelled";
        if (e instanceof WrongClusterException) return "wrong_cluster";
        if (e instanceof UnavailableException) return "unavailable";
        return "unclassified";
    }

    static Duration ms(Map<String, Object> step, String name) {
        Object v = step.get(name);
        return Duration.ofMillis(v == null ? 0 : ((Number) v).longValue());
    }

    /** The client of a scenario, with the settings its options name. */
    static TicketBroker client(String addr, Map<String, Object> options) {
        TicketBroker.Builder b = TicketBroker.builder().addrs(addr).backoff(Duration.ofMillis(10), Duration.ofMillis(100));
        if (options != null) {
            if (options.containsKey("release_bound_ms")) b.releaseBound(ms(options, "release_bound_ms"));
            if (options.containsKey("client_ping_ms")) b.clientPing(ms(options, "client_ping_ms"));
            if (options.containsKey("answer_grace_ms")) b.answerGrace(ms(options, "answer_grace_ms"));
            if (options.containsKey("connect_wait_ms")) b.connectWait(ms(options, "connect_wait_ms"));
            if (options.containsKey("backoff_ms")) b.backoff(ms(options, "backoff_ms"), ms(options, "backoff_ms"));
            if (options.containsKey("cluster_id")) b.clusterId((String) options.get("cluster_id"));
        }
        return b.connect();
    }

    @SuppressWarnings("unchecked")
    static void run(Path file) throws Exception {
        Map<String, Object> sc = (Map<String, Object>) Json.parse(Files.readString(file));
        String rule = sc.get("name") + ": " + sc.get("rule");
        try (Fake fake = new Fake(file);
                TicketBroker b = client(fake.addr, (Map<String, Object>) sc.get("options"))) {
            Ticket[] ticket = new Ticket[1];
            Map<String, CompletableFuture<String>> background = new java.util.HashMap<>();
            List<Map<String, Object>> steps = (List<Map<String, Object>>) sc.get("client");
            for (int i = 0; i < steps.size(); i++) {
                Map<String, Object> step = steps.get(i);
                String op = (String) step.get("op");
                Duration within = ms(step, "within_ms").isZero() ? PATIENCE : ms(step, "within_ms");
                if (op.equals("await_frame")) {
                    int count = step.containsKey("count") ? ((Number) step.get("count")).intValue() : 1;
                    if (!fake.awaitFrame((String) step.get("type"), within, count)) {
                        fail("step " + i + ": the servers did not receive " + count + " " + step.get("type") + " frames within " + within);
                    }
                    continue;
                }
                if (op.equals("pause")) {
                    // The scenario's idle time: no call, the connection stays as it is.
                    Thread.sleep(((Number) step.get("pause_ms")).longValue());
                    continue;
                }
                CompletableFuture<String> outcome;
                Thread th = null;
                if (op.equals("await")) {
                    outcome = background.get((String) step.get("call"));
                } else {
                    CompletableFuture<String> out = new CompletableFuture<>();
                    outcome = out;
                    // A blocking call on its own thread: a cancel is an interrupt.
                    th = new Thread(() -> {
                        try {
                            switch (op) {
                                case "acquire" -> {
                                    Ticket t = b.acquireBlocking((String) step.get("key"), ms(step, "wait_ms"), ms(step, "lease_ms"), ms(step, "budget_ms"));
                                    synchronized (ticket) {
                                        ticket[0] = t;
                                    }
                                    out.complete("granted " + t.getToken());
                                }
                                case "release" -> {
                                    Ticket t;
                                    synchronized (ticket) {
                                        t = ticket[0];
                                    }
                                    t.releaseBlocking();
                                    out.complete("released");
                                }
                                case "release_token" -> {
                                    b.releaseTokenBlocking((String) step.get("key"), Long.parseUnsignedLong((String) step.get("token")));
                                    out.complete("released");
                                }
                                case "wait_ready" -> {
                                    b.waitReadyBlocking(ms(step, "timeout_ms"));
                                    out.complete("ready");
                                }
                                case "describe" -> out.complete(b.describeBlocking((String) step.get("key")).held() ? "held" : "free");
                                case "close" -> {
                                    b.close();
                                    out.complete("closed");
                                }
                                default -> out.complete("unknown op " + op);
                            }
                        } catch (Throwable e) {
                            out.complete("error " + errorClass(e) + " (" + e + ")");
                        }
                    }, "conformance step " + i);
                    th.setDaemon(true);
                    th.start();
                    String cancelWhen = (String) step.get("cancel_when");
                    if (cancelWhen != null) {
                        Thread call = th;
                        Duration bound = within;
                        Runnable canceller = () -> {
                            try {
                                if (fake.awaitFrame(cancelWhen, bound, 1)) {
                                    call.interrupt();
                                }
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                        };
                        if (step.containsKey("background")) {
                            Thread c = new Thread(canceller, "conformance cancel " + i);
                            c.setDaemon(true);
                            c.start();
                        } else {
                            canceller.run();
                        }
                    }
                    if (step.containsKey("background")) {
                        background.put((String) step.get("background"), out);
                        continue;
                    }
                }
                String got;
                try {
                    got = outcome.get(within.toMillis(), TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    if (th != null) {
                        th.interrupt();
                    }
                    throw new AssertionError("step " + i + " (" + op + "): no outcome within " + within + " (the bound catches a hang)" + fake.violations());
                }
                Map<String, Object> expect = (Map<String, Object>) step.get("expect");
                String want = expect.containsKey("error") ? "error " + expect.get("error") : (String) expect.get("result");
                if (expect.containsKey("token")) {
                    want += " " + expect.get("token");
                }
                String gotClass = got.contains(" (") ? got.substring(0, got.indexOf(" (")) : got;
                if (!expect.containsKey("token") && gotClass.startsWith("granted ")) {
                    gotClass = "granted";
                }
                if (!want.equals(gotClass)) {
                    assertEquals(want, gotClass, "step " + i + " (" + op + "): got " + got + fake.violations() + "\nrule: " + rule);
                }
                for (Object name : (List<Object>) expect.getOrDefault("names", List.of())) {
                    if (!got.contains((String) name)) {
                        throw new AssertionError("step " + i + " (" + op + "): the error " + got + " does not name " + name + "\nrule: " + rule);
                    }
                }
            }
            String verdict = fake.check();
            assertEquals("ok", verdict, "frames sent\nrule: " + rule);
        }
    }
}
