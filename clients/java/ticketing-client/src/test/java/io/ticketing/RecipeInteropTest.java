package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.coordination.CoordinationClient;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A Go process (internal/coordpeer, a session of the Go SDK driven line by
 * line, the one the C# client's interoperability test drives too) and this
 * client share one mutex and one election on one node of a real ticketd:
 * the recipes' name spaces and markers are the same, so Java sees Go
 * holding the lock and leading, waits, and takes both over with larger
 * fencing tokens once Go lets go.
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
        assertTrue(line != null && line.startsWith(word + " "), "the Go process printed " + line + ", want " + word);
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
                try (Session s = c.sessionBlocking("/interop", Duration.ofSeconds(10), "java")) {
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
                    Lease mine = lock.get(60, TimeUnit.SECONDS);
                    assertTrue(mine.token() > goLock, "Java's hold has a larger token than Go's");
                    Election.Leadership l = lead.get(60, TimeUnit.SECONDS);
                    assertTrue(l.token() > goLead, "Java's leadership has a larger token than Go's");
                    assertArrayEquals("java".getBytes(StandardCharsets.UTF_8), e.leaderBlocking().data());
                    m.unlockBlocking();
                    e.resignBlocking();
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
