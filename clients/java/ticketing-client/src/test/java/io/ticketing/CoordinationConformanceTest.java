package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.ticketing.coordination.AbortedException;
import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.AlreadyExistsException;
import io.ticketing.coordination.BadRequestException;
import io.ticketing.coordination.BadSessionException;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.DeadlinePassedException;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.LimitExceededException;
import io.ticketing.coordination.LostException;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.NotFoundException;
import io.ticketing.coordination.PreconditionFailedException;
import io.ticketing.coordination.ReleasedException;
import io.ticketing.coordination.Session;
import io.ticketing.coordination.SessionExpiredException;
import io.ticketing.coordination.UnauthorizedException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The Java runner of the coordination scenarios of the language-neutral
 * conformance suite (testdata/conformance/coordination, described in
 * testdata/conformance/README.md): each scenario is served by the
 * faketicketd command and driven through a coordination client over a
 * broker, as the Go runner drives the Go one.
 */
class CoordinationConformanceTest {
    /** The scenarios' directory; TICKETING_CONFORMANCE_COORDINATION overrides it. */
    static Path dir() {
        String env = System.getenv("TICKETING_CONFORMANCE_COORDINATION");
        return env != null && !env.isEmpty() ? Path.of(env) : ConformanceTest.repo().resolve("testdata/conformance/coordination");
    }

    @TestFactory
    Stream<DynamicTest> scenarios() throws IOException {
        return ConformanceTest.runAll(dir(), "coordination scenario", CoordinationConformanceTest::run);
    }

    /** err's class as the scenarios spell it; the coordination classes first. */
    static String errorClass(Throwable e) {
        if (e instanceof DeadlinePassedException) return "deadline_passed";
        if (e instanceof LostException) return "lost";
        if (e instanceof ReleasedException) return "released";
        if (e instanceof io.ticketing.coordination.WrongKindException) return "wrong_kind";
        if (e instanceof NotFoundException) return "not_found";
        if (e instanceof AlreadyExistsException) return "already_exists";
        if (e instanceof BadRequestException) return "bad_request";
        if (e instanceof PreconditionFailedException) return "precondition_failed";
        if (e instanceof AbortedException) return "aborted";
        if (e instanceof SessionExpiredException) return "session_expired";
        if (e instanceof BadSessionException) return "bad_session";
        if (e instanceof UnauthorizedException) return "unauthorized";
        if (e instanceof LimitExceededException) return "limit_exceeded";
        return ConformanceTest.errorClass(e);
    }

    static String sized(Map<String, Object> step, String field, String bytesField, String prefix) {
        Object n = step.get(bytesField);
        if (n == null) {
            return (String) step.getOrDefault(field, "");
        }
        int len = ((Number) n).intValue();
        return prefix + "x".repeat(len - prefix.length());
    }

    @SuppressWarnings("unchecked")
    static void run(Path file) throws Exception {
        Map<String, Object> sc = (Map<String, Object>) Json.parse(Files.readString(file));
        String rule = sc.get("name") + ": " + sc.get("rule");
        try (ConformanceTest.Fake fake = new ConformanceTest.Fake(file);
                TicketBroker b = ConformanceTest.client(fake.addr, (Map<String, Object>) sc.get("options"));
                CoordinationClient c = CoordinationClient.create(b)) {
            // Set by calls that may run in the background.
            java.util.concurrent.atomic.AtomicReference<Session> session = new java.util.concurrent.atomic.AtomicReference<>();
            java.util.concurrent.atomic.AtomicReference<Lease> lease = new java.util.concurrent.atomic.AtomicReference<>();
            Map<String, java.util.concurrent.CompletableFuture<String>> background = new java.util.HashMap<>();
            List<Map<String, Object>> steps = (List<Map<String, Object>>) sc.get("client");
            try {
                for (int i = 0; i < steps.size(); i++) {
                    Map<String, Object> step = steps.get(i);
                    String op = (String) step.get("op");
                    Duration within = ConformanceTest.ms(step, "within_ms").isZero() ? ConformanceTest.PATIENCE : ConformanceTest.ms(step, "within_ms");
                    if (op.equals("await_frame")) {
                        int count = step.containsKey("count") ? ((Number) step.get("count")).intValue() : 1;
                        if (!fake.awaitFrame((String) step.get("type"), within, count)) {
                            fail("step " + i + ": the servers did not receive " + count + " " + step.get("type") + " frames within " + within);
                        }
                        continue;
                    }
                    if (op.equals("await")) {
                        String got = background.get((String) step.get("call")).get(within.toMillis() + 1000, TimeUnit.MILLISECONDS);
                        compare(step, i, op, got, fake, rule);
                        continue;
                    }
                    java.util.concurrent.CompletableFuture<String> out = new java.util.concurrent.CompletableFuture<>();
                    Thread th = new Thread(() -> {
                        try {
                            byte[] data = new byte[step.containsKey("data_bytes") ? ((Number) step.get("data_bytes")).intValue() : 0];
                            String path = sized(step, "path", "path_bytes", "/");
                            String name = sized(step, "name", "name_bytes", "");
                            switch (op) {
                                case "session" -> {
                                    session.set(c.sessionBlocking(path, ConformanceTest.ms(step, "session_timeout_ms"), ""));
                                    out.complete("attached");
                                }
                                case "close_session" -> {
                                    session.get().close();
                                    out.complete("closed");
                                }
                                case "create_node" -> {
                                    c.createNodeBlocking(path, NodeConfig.defaults());
                                    out.complete("ok");
                                }
                                case "describe_node" -> {
                                    c.describeNodeBlocking(path);
                                    out.complete("ok");
                                }
                                case "create_semaphore" -> {
                                    session.get().createSemaphoreBlocking(name, ((Number) step.getOrDefault("limit", 0L)).longValue(), data);
                                    out.complete("ok");
                                }
                                case "update_semaphore" -> {
                                    session.get().updateSemaphoreBlocking(name, data);
                                    out.complete("ok");
                                }
                                case "delete_semaphore" -> {
                                    session.get().deleteSemaphoreBlocking(name, false);
                                    out.complete("ok");
                                }
                                case "acquire_semaphore" -> {
                                    AcquireOptions o = AcquireOptions.shared().timeout(ConformanceTest.ms(step, "wait_ms")).data(data);
                                    if (step.containsKey("count")) {
                                        o = o.count(((Number) step.get("count")).longValue());
                                    }
                                    if (Boolean.TRUE.equals(step.get("exclusive"))) {
                                        o = o.count(io.ticketing.wire.Coord.EXCLUSIVE);
                                    }
                                    if (Boolean.TRUE.equals(step.get("ephemeral"))) {
                                        o = o.ephemeral();
                                    }
                                    lease.set(session.get().acquireBlocking(name, o));
                                    out.complete("acquired " + Long.toUnsignedString(lease.get().token()));
                                }
                                case "mutex_lock" -> {
                                    lease.set(session.get().mutex(name).lockBlocking());
                                    out.complete("acquired " + Long.toUnsignedString(lease.get().token()));
                                }
                                case "mutex_try_lock" -> {
                                    Lease l = session.get().mutex(name).tryLockBlocking();
                                    if (l != null) {
                                        lease.set(l);
                                    }
                                    out.complete(l == null ? "not_acquired" : "acquired " + Long.toUnsignedString(l.token()));
                                }
                                case "election_campaign" -> {
                                    io.ticketing.coordination.Election.Leadership l = session.get().election(name).campaignBlocking(data);
                                    lease.set(l.lease());
                                    out.complete("leading " + Long.toUnsignedString(l.token()));
                                }
                                case "release_semaphore" -> {
                                    lease.get().releaseBlocking();
                                    out.complete("released");
                                }
                                case "watch_semaphore" -> {
                                    // JVM scenarios only (src/test/resources/jvm-conformance): a watch on data and owners; "changed" once it fires
                                    Session.Watched w = session.get().watchSemaphoreBlocking(name, true, true);
                                    try {
                                        w.changed().get(within.toMillis(), TimeUnit.MILLISECONDS);
                                        out.complete("changed");
                                    } catch (TimeoutException e) {
                                        out.complete("no change");
                                    }
                                }
                                case "lease_valid" -> out.complete(lease.get().isValid() ? "valid" : "invalid");
                                case "lease_ended" -> {
                                    RuntimeException cause = lease.get().ended().get(within.toMillis(), TimeUnit.MILLISECONDS);
                                    out.complete("error " + errorClass(cause) + " (" + cause + ")");
                                }
                                default -> out.complete("unknown op " + op);
                            }
                        } catch (TimeoutException e) {
                            out.complete("still valid");
                        } catch (Throwable e) {
                            out.complete("error " + errorClass(e) + " (" + e + ")");
                        }
                    }, "coordination step " + i);
                    th.setDaemon(true);
                    th.start();
                    if (step.containsKey("background")) {
                        background.put((String) step.get("background"), out);
                        continue;
                    }
                    String got;
                    try {
                        got = out.get(within.toMillis() + 1000, TimeUnit.MILLISECONDS);
                    } catch (TimeoutException e) {
                        th.interrupt();
                        throw new AssertionError("step " + i + " (" + op + "): no outcome within " + within + " (the bound catches a hang)" + fake.violations());
                    }
                    compare(step, i, op, got, fake, rule);
                }
                String verdict = fake.check();
                assertEquals("ok", verdict, "frames sent\nrule: " + rule);
            } finally {
                if (session.get() != null) {
                    session.get().closeAsync();
                }
            }
        }
    }

    @SuppressWarnings("unchecked")
    static void compare(Map<String, Object> step, int i, String op, String got, ConformanceTest.Fake fake, String rule) throws Exception {
        Map<String, Object> expect = (Map<String, Object>) step.get("expect");
        String want = expect.containsKey("error") ? "error " + expect.get("error") : (String) expect.get("result");
        if (expect.containsKey("token")) {
            want += " " + expect.get("token");
        }
        String gotClass = got.contains(" (") ? got.substring(0, got.indexOf(" (")) : got;
        if (!expect.containsKey("token") && (gotClass.startsWith("acquired ") || gotClass.startsWith("leading "))) {
            gotClass = gotClass.substring(0, gotClass.indexOf(' '));
        }
        if (!want.equals(gotClass)) {
            assertEquals(want, gotClass, "step " + i + " (" + op + "): got " + got + fake.violations() + "\nrule: " + rule);
        }
    }
}
