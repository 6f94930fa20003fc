package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.NodeConfig;
import io.ticketing.coordination.Session;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A client process frozen (SIGSTOP) past its session's deadline while it
 * holds a semaphore: the server expires its session and grants the
 * semaphore to another session; when the frozen process resumes (SIGCONT),
 * the first check of its lease, made before anything else it does, says
 * the hold is gone and its session is not ATTACHED.
 */
@Timeout(120)
class FrozenProcessTest {
    static void signal(long pid, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "kill -" + sig + " " + pid + ": " + out);
    }

    @Test
    void aFrozenHolderSeesItsLeaseLostAtItsFirstCheckAfterItResumes() throws Exception {
        try (Ticketd cluster = new Ticketd(1)) {
            String addr = cluster.awaitLeader(30_000).addr;
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            try (TicketBroker b = TicketBroker.connect(addr); CoordinationClient c = CoordinationClient.create(b)) {
                c.createNodeBlocking("/java/frozen", NodeConfig.defaults());
                Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), FrozenSessionChild.class.getName(), addr,
                        "/java/frozen").redirectError(ProcessBuilder.Redirect.INHERIT).start();
                boolean stopped = false;
                try {
                    BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
                    String held = out.readLine();
                    assertTrue(held != null && held.startsWith("held "), "the child printed " + held);
                    long childToken = Long.parseLong(held.substring(5));
                    signal(child.pid(), "STOP");
                    stopped = true;
                    try (Session other = c.sessionBlocking("/java/frozen", Duration.ofSeconds(10), "other")) {
                        // Granted once the server has expired the frozen child's session.
                        Lease mine = other.acquireBlocking("s", AcquireOptions.exclusive().ephemeral());
                        assertTrue(mine.token() > childToken);
                        OutputStream in = child.getOutputStream();
                        // Queued before the child resumes, so that the check races its own timers.
                        in.write("check\n".getBytes(StandardCharsets.UTF_8));
                        in.flush();
                        signal(child.pid(), "CONT");
                        stopped = false;
                        String check = out.readLine();
                        assertTrue(check != null && check.startsWith("valid=false "), "the resumed child's first check: " + check
                                + " (another session holds the semaphore: " + mine.isValid() + ")");
                        assertNotEquals("ATTACHED", check.substring(check.indexOf("state=") + 6), "the resumed child's state");
                        in.close();
                    }
                    assertTrue(child.waitFor(30, TimeUnit.SECONDS), "the child exits when its input ends");
                } finally {
                    if (stopped) {
                        signal(child.pid(), "CONT");
                    }
                    child.destroyForcibly();
                }
            }
        }
    }
}
