package io.ticketing;

import java.time.Duration;
import java.util.Arrays;

/**
 * Sequential acquire+release latency through the Java client against a
 * running server (not a test: run it by hand, e.g.
 * {@code java -cp target/classes:target/test-classes io.ticketing.LatencyProbe 127.0.0.1:5225 2000}).
 * Prints p50 and p99 in ms.
 */
public final class LatencyProbe {
    private LatencyProbe() {}

    public static void main(String[] args) {
        String addr = args.length > 0 ? args[0] : "127.0.0.1:5225";
        int n = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        try (TicketBroker b = TicketBroker.connect(addr)) {
            b.waitReadyBlocking(Duration.ofSeconds(10));
            run(b, n / 5); // warm-up (JIT)
            long[] d = run(b, n);
            Arrays.sort(d);
            System.out.printf("java: n=%d p50=%.3fms p99=%.3fms%n", n, d[n / 2] / 1e6, d[n * 99 / 100] / 1e6);
        }
    }

    static long[] run(TicketBroker b, int n) {
        long[] d = new long[n];
        for (int i = 0; i < n; i++) {
            long s = System.nanoTime();
            Ticket t = b.acquireBlocking("probe-java", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO);
            t.releaseBlocking();
            d[i] = System.nanoTime() - s;
        }
        return d;
    }
}
