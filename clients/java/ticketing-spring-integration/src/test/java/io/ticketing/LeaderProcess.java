package io.ticketing;

import io.ticketing.spring.integration.TicketingLockRegistry;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.DefaultCandidate;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;

/**
 * A separate JVM for the leader test: one LockRegistryLeaderInitiator on a
 * TicketingLockRegistry. It prints "ready <session id>" once its session
 * is open, then "granted <token> <nanoTime>" and "revoked <nanoTime>" as
 * it sees leadership come and go, and runs until killed.
 */
public final class LeaderProcess {
    private LeaderProcess() {}

    public static void main(String[] args) throws Exception {
        String addr = args[0];
        String role = args[1];
        Duration sessionTimeout = Duration.ofMillis(Long.parseLong(args[2]));
        TicketBroker broker = TicketBroker.connect(addr);
        TicketingLockRegistry registry = TicketingLockRegistry.builder(broker).sessionTimeout(sessionTimeout).build();
        DefaultCandidate candidate = new DefaultCandidate(java.util.UUID.randomUUID().toString(), role) {
            @Override
            public void onGranted(Context ctx) {
                long token = registry.obtain(role).token();
                say("granted " + token + " " + System.nanoTime());
            }

            @Override
            public void onRevoked(Context ctx) {
                say("revoked " + System.nanoTime());
            }
        };
        LockRegistryLeaderInitiator initiator = new LockRegistryLeaderInitiator(registry, candidate);
        initiator.start();
        say("ready");
        new CountDownLatch(1).await(); // until killed
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
