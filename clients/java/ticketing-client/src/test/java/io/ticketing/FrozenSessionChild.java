package io.ticketing;

import io.ticketing.coordination.AcquireOptions;
import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.Lease;
import io.ticketing.coordination.Session;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The child JVM of {@link FrozenProcessTest}: holds the semaphore "s" of
 * node ARGS[1] through a session with a 2 s timeout, prints "held TOKEN",
 * then answers each "check" line on its input with "valid=BOOL state=STATE"
 * (the lease's isValid() and the session's state(), nothing else done
 * first), until its input ends.
 */
public final class FrozenSessionChild {
    private FrozenSessionChild() {}

    public static void main(String[] args) throws Exception {
        try (TicketBroker b = TicketBroker.connect(args[0]); CoordinationClient c = CoordinationClient.create(b)) {
            Session s = c.sessionBlocking(args[1], Duration.ofSeconds(2), "frozen");
            Lease lease = s.acquireBlocking("s", AcquireOptions.exclusive().ephemeral().timeout(Duration.ZERO));
            System.out.println("held " + lease.token());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.equals("check")) {
                    boolean valid = lease.isValid();
                    Session.State state = s.state();
                    System.out.println("valid=" + valid + " state=" + state);
                    System.out.flush();
                }
            }
        }
    }
}
