package io.ticketing;

import java.time.Duration;

/**
 * The state of one key as the leader saw it when it answered a describe.
 *
 * @param key the key
 * @param held whether the key is held
 * @param token the holder's token (0 when free)
 * @param owner the holder's acquire owner (all zeros when free)
 * @param remaining the holder's remaining lease as the leader sees it
 * @param lease the holder's lease
 * @param waiters acquires waiting in the key's queue
 */
public record Description(String key, boolean held, long token, Owner owner, Duration remaining, Duration lease, long waiters) {}
