package io.ticketing.coordination;

/**
 * A node's configuration and sizes.
 *
 * @param config the node's configuration, defaults filled in
 * @param sessions the node's sessions
 * @param semaphores the node's semaphores
 * @param waiters the acquires queued over its semaphores
 */
public record NodeDescription(NodeConfig config, long sessions, long semaphores, long waiters) {}
