package io.ticketing;

import static io.ticketing.FakeServer.type;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Only the Java client still meets servers that predate release by owner
 * (U): such a server ends the session with E 3, and the client stops asking.
 */
class OwnerReleaseCompatibilityTest extends FakeServerFixture {
    /** A server that predates U ends the session with E 3; the client then stops sending U. */
    @Test
    void aServerWithoutReleaseByOwnerIsNotAskedAgain() throws Exception {
        FakeServer.Locks locks = new FakeServer.Locks();
        FakeServer srv = server((s, n) -> {
            s.hello();
            while (true) {
                Frame f = s.readRequest();
                if (f.type == Type.RELEASE_OWNER) {
                    s.send(FakeServer.error(io.ticketing.wire.ErrorCode.UNKNOWN_FRAME, "unknown frame type U"));
                    return;
                }
                if (f.type == Type.ACQUIRE && new String(f.key).startsWith("lost")) {
                    s.close(); // the answer is lost with the connection
                    return;
                }
                Frame a = locks.answer(f);
                if (a != null) {
                    s.send(a);
                }
            }
        });
        TicketBroker b = broker(srv.addr());
        assertThrows(IndeterminateException.class, () -> b.acquireBlocking("lost-1", ZERO, Duration.ofSeconds(30), ZERO));
        srv.await(1, type(Type.RELEASE_OWNER));
        eventually("the client notes that the server does not know U", b::ownerReleaseUnsupported);
        assertThrows(IndeterminateException.class, () -> b.acquireBlocking("lost-2", ZERO, Duration.ofSeconds(30), ZERO));
        // Work goes on, and no second U ends another session.
        b.acquireBlocking("fine", ZERO, Duration.ofSeconds(30), ZERO).releaseBlocking();
        b.describeBlocking("fine");
        assertEquals(1, srv.received(type(Type.RELEASE_OWNER)).size(), "U was sent to a server that does not know it");
    }
}
