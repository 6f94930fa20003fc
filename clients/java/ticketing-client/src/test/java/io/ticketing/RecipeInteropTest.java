package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Discovery;
import io.ticketing.coordination.Election;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.Mutex;
import io.ticketing.coordination.Session;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A Go process (internal/coordpeer, a session of the Go SDK driven line by
 * line, the one the C# client's interoperability test drives too) and this
 * client share one mutex, one election, one service and one configuration
 * value on one node of a real ticketd: the recipes' name spaces and markers
 * are the same, so Java sees Go holding the lock, leading, registered and
 * published, waits, takes the lock and the leadership over with larger
 * fencing tokens once Go lets go, and Go reads back the endpoint and the
 * value Java registered and published.
 */
@Timeout(180)
class RecipeInteropTest {
    static Path goBinary() throws Exception {
        Path out = Path.of("target", "coordpeer").toAbsolutePath();
        Process p = new ProcessBuilder("go", "build", "-o", out.toString(), "./internal/coordpeer/cmd/coordpeer")
                .directory(ConformanceTest.repo().toFile()).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new AssertionError("go build ./internal/coordpeer/cmd/coordpeer failed: " + log);
        }
        return out;
    }

    /** Sends one command to the Go process and reads its answer, which must start with word. */
    static String ask(OutputStream in, BufferedReader r, String command, String word) throws Exception {
        in.write((command + "\n").getBytes(StandardCharsets.UTF_8));
        in.flush();
        String line = r.readLine();
        assertTrue(line != null && line.startsWith(word), "the Go process answered " + command + " with " + line + ", want " + word);
        return line;
    }

    static long expect(OutputStream in, BufferedReader r, String command, String word) throws Exception {
        String line = ask(in, r, command, word + " ");
        return Long.parseUnsignedLong(line.substring(word.length() + 1).trim());
    }

    @Test
    void goAndJavaShareOneMutexAndOneElection() throws Exception {
        try (Ticketd cluster = new Ticketd(1)) {
            String addr = cluster.awaitLeader(30_000).addr;
            Process go = new ProcessBuilder(goBinary().toString(), "-addr", addr, "-node", "/interop")
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            try (TicketBroker b = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(b)) {
                BufferedReader out = new BufferedReader(new InputStreamReader(go.getInputStream(), StandardCharsets.UTF_8));
                OutputStream in = go.getOutputStream();
                long goLock = expect(in, out, "lock shared", "locked");
                long goLead = expect(in, out, "campaign shared go", "leading");
                long goRegistered = expect(in, out, "register shared go", "registered");
                ask(in, out, "publish shared from-go", "published");
                try (Session s = c.sessionBlocking("/interop", Duration.ofSeconds(10), "java")) {
                    List<Discovery.Endpoint> members = s.discovery("shared").listBlocking();
                    assertEquals(1, members.size(), "Go's registration");
                    assertEquals(goRegistered, members.get(0).token());
                    assertArrayEquals("go".getBytes(StandardCharsets.UTF_8), members.get(0).data());
                    assertArrayEquals("from-go".getBytes(StandardCharsets.UTF_8), s.publication("shared").getBlocking());
                    Lease registered = s.discovery("shared").registerBlocking("java".getBytes(StandardCharsets.UTF_8));
                    s.publication("shared").publishBlocking("from-java".getBytes(StandardCharsets.UTF_8));
                    Mutex m = s.mutex("shared");
                    assertNull(m.tryLockBlocking(), "Go holds the mutex");
                    Election e = s.election("shared");
                    Election.Leader leader = e.leaderBlocking();
                    assertEquals(goLead, leader.token());
                    assertArrayEquals("go".getBytes(StandardCharsets.UTF_8), leader.data());
                    CompletableFuture<Lease> lock = CompletableFuture.supplyAsync(m::lockBlocking);
                    CompletableFuture<Election.Leadership> lead = CompletableFuture.supplyAsync(() -> e.campaignBlocking("java".getBytes(StandardCharsets.UTF_8)));
                    ask(in, out, "unlock shared", "unlocked");
                    ask(in, out, "resign shared", "resigned");
                    assertEquals("value from-java", ask(in, out, "get shared", "value "));
                    // "endpoints session:token:endpoint ...", in registration order.
                    List<String> endpoints = new ArrayList<>();
                    for (String ep : ask(in, out, "endpoints shared", "endpoints").substring("endpoints".length()).trim().split(" ")) {
                        endpoints.add(ep.substring(ep.lastIndexOf(':') + 1));
                    }
                    assertEquals(List.of("go", "java"), endpoints);
                    Lease mine = lock.get(60, TimeUnit.SECONDS);
                    assertTrue(mine.token() > goLock, "Java's hold has a larger token than Go's");
                    Election.Leadership l = lead.get(60, TimeUnit.SECONDS);
                    assertTrue(l.token() > goLead, "Java's leadership has a larger token than Go's");
                    assertArrayEquals("java".getBytes(StandardCharsets.UTF_8), e.leaderBlocking().data());
                    m.unlockBlocking();
                    e.resignBlocking();
                    registered.releaseBlocking();
                    in.close();
                }
            } finally {
                if (!go.waitFor(30, TimeUnit.SECONDS)) {
                    go.destroyForcibly();
                }
            }
            assertEquals(0, go.exitValue(), "the Go process failed");
        }
    }
}
