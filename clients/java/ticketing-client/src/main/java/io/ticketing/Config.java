package io.ticketing;

import java.util.List;
import java.util.concurrent.Executor;
import javax.net.ssl.SSLContext;

/** The broker's settled configuration (built and checked by {@link TicketBroker.Builder}). */
final class Config {
    List<String> addrs;
    String token = "";
    TlsMode tlsMode = TlsMode.Off;
    SSLContext ssl;
    Executor executor;
    boolean ownExecutor;
    TicketBroker.ReleaseObserver observer;
    BrokerListener listener;
    long dialTimeoutMs = 5000;
    long connectWaitMs = 10_000;
    long releaseBoundMs = TicketBroker.RELEASE_BOUND.toMillis();
    int releaseQueue = TicketBroker.DEFAULT_RELEASE_QUEUE;
    long drainMs = 1000;
    long backoffBaseMs = 25;
    long backoffMaxMs = 500;
    long clientPingMs = Conn.CLIENT_PING_MS;
    /** The least time a request waits for its answer on a live connection (an acquire: on top of its wait). */
    long answerGraceMs = 10_000;
    /** The cluster ID given to the builder, or null: pinned at the first server that reports one. */
    String clusterId;
    /** The cluster this broker serves (set when the broker is built). */
    ClusterPin pin;
}
