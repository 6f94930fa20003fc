package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every example of CoordinationExamples against a real ticketd, its output checked (as Go's Example functions are). */
@Timeout(120)
class CoordinationExamplesTest {
    static Ticketd cluster;
    static String addr;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Ticketd(1);
        addr = cluster.awaitLeader(30_000).addr;
    }

    @AfterAll
    static void stop() throws Exception {
        cluster.close();
    }

    interface Example {
        void run(String addr, PrintStream out) throws Exception;
    }

    static void check(Example e, String want) throws Exception {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            e.run(addr, out);
        }
        assertEquals(want, buf.toString(StandardCharsets.UTF_8).replace("\r\n", "\n"));
    }

    @Test
    void workers() throws Exception {
        check(CoordinationExamples::workers, "held 1 of 3, valid true\n");
    }

    @Test
    void mutex() throws Exception {
        check(CoordinationExamples::mutex, "b's try while a holds it: false\nb's try after the unlock: true, larger token: true\n");
    }

    @Test
    void election() throws Exception {
        check(CoordinationExamples::election, "leader: nobody\nleader: 10.0.0.7:8080\nleader: nobody\n");
    }

    @Test
    void discovery() throws Exception {
        check(CoordinationExamples::discovery,
                "api at []\napi at [10.0.0.7:8080]\napi at [10.0.0.7:8080, 10.0.0.8:8080]\napi at [10.0.0.8:8080]\n");
    }

    @Test
    void publication() throws Exception {
        check(CoordinationExamples::publication, "limits: unset\nlimits: max=5\nlimits: max=7\nget: max=7\n");
    }

    @Test
    void listSessions() throws Exception {
        check(CoordinationExamples::listSessions, "worker-1 attached true, timeout 10 s\nworker-2 attached true, timeout 10 s\n");
    }
}
