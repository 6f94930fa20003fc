/**
 * Suspend functions and [Flow]s for Kotlin coroutines on the coordination
 * client (`io.ticketing.coordination`): the same client, sessions and
 * connection as its blocking and CompletableFuture calls.
 *
 * ```
 * import io.ticketing.kotlin.*
 *
 * val coordination = CoordinationClient.create(broker)
 * val session = coordination.session("/app", Duration.ofSeconds(10), "worker-1")
 * val lock = session.mutex("nightly-report")
 * val lease = lock.lock()
 * // fence every write with lease.token()
 * lock.unlock()
 * session.election("primary").leaders().collect { println("leader: session ${it.session()}") }
 * ```
 *
 * Cancelling a coroutine that waits for a semaphore (an acquire, a lock, a
 * campaign, a registration) withdraws its wait on the server, in the
 * background, and a hold granted anyway is released: a cancelled coroutine
 * never leaves a hold behind. A flow runs a [Subscription] while it is
 * collected: it emits the current value first and then every change; it
 * completes normally when its session is closed by [Session.close] and fails
 * with the cause when the session expires or the semaphore is not the
 * recipe's.
 */
@file:JvmName("CoordinationCoroutines")

package io.ticketing.kotlin

import io.ticketing.coordination.AcquireOptions
import io.ticketing.coordination.CoordinationClient
import io.ticketing.coordination.Discovery
import io.ticketing.coordination.Election
import io.ticketing.coordination.Lease
import io.ticketing.coordination.Mutex
import io.ticketing.coordination.NodeConfig
import io.ticketing.coordination.NodeDescription
import io.ticketing.coordination.Publication
import io.ticketing.coordination.SemaphoreDescription
import io.ticketing.coordination.Session
import io.ticketing.coordination.Subscription
import java.time.Duration
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.channels.awaitClose
import kotlinx.coroutines.channels.trySendBlocking
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.callbackFlow
import kotlinx.coroutines.flow.distinctUntilChanged
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.runInterruptible

/** Creates the node at [path]; see [CoordinationClient.createNodeBlocking]. */
suspend fun CoordinationClient.createNode(path: String, config: NodeConfig) {
    createNodeAsync(path, config).awaitTicketing(null)
}

/** Changes the given fields of the node's configuration; see [CoordinationClient.alterNodeBlocking]. */
suspend fun CoordinationClient.alterNode(path: String, config: NodeConfig) {
    alterNodeAsync(path, config).awaitTicketing(null)
}

/** Drops the node; see [CoordinationClient.dropNodeBlocking]. */
suspend fun CoordinationClient.dropNode(path: String) {
    dropNodeAsync(path).awaitTicketing(null)
}

/** The node's configuration and sizes; see [CoordinationClient.describeNodeBlocking]. */
suspend fun CoordinationClient.describeNode(path: String): NodeDescription = describeNodeAsync(path).awaitTicketing(null)

/** The node's sessions by id; see [CoordinationClient.listSessionsBlocking]. */
suspend fun CoordinationClient.listSessions(path: String): List<CoordinationClient.SessionInfo> =
    listSessionsAsync(path).awaitTicketing(null)

/**
 * Starts a session on the node at [path]; see [CoordinationClient.sessionBlocking].
 * A session that starts after the coroutine was cancelled is closed.
 */
suspend fun CoordinationClient.session(path: String, timeout: Duration, description: String): Session =
    sessionAsync(path, timeout, description).awaitTicketing { it.closeAsync() }

/** Creates a persistent semaphore; see [Session.createSemaphoreBlocking]. */
suspend fun Session.createSemaphore(name: String, limit: Long, data: ByteArray) {
    createSemaphoreAsync(name, limit, data).awaitTicketing(null)
}

/** Replaces the semaphore's data; see [Session.updateSemaphoreBlocking]. */
suspend fun Session.updateSemaphore(name: String, data: ByteArray) {
    updateSemaphoreAsync(name, data).awaitTicketing(null)
}

/** Deletes the semaphore; see [Session.deleteSemaphoreBlocking]. */
suspend fun Session.deleteSemaphore(name: String, force: Boolean) {
    deleteSemaphoreAsync(name, force).awaitTicketing(null)
}

/**
 * Acquires the semaphore; see [Session.acquireBlocking]. Cancelling the
 * coroutine withdraws the wait (a hold granted anyway is released).
 */
suspend fun Session.acquire(name: String, options: AcquireOptions = AcquireOptions.shared()): Lease =
    acquireAsync(name, options).awaitTicketing { it.releaseAsync() }

/** Describes the semaphore; see [Session.describeSemaphoreBlocking]. */
suspend fun Session.describeSemaphore(name: String, owners: Boolean = true, waiters: Boolean = true): SemaphoreDescription =
    describeSemaphoreAsync(name, owners, waiters).awaitTicketing(null)

/**
 * The semaphore's description (owners and waiters included) at the start
 * and again after every change of its [data] and/or [owners], through
 * one-shot watches set again after each notification (also the empty one of
 * a lost connection, so no change is missed across a restore).
 */
fun Session.semaphoreChanges(name: String, data: Boolean = true, owners: Boolean = true): Flow<SemaphoreDescription> = flow {
    while (true) {
        val watched = runInterruptible(Dispatchers.IO) { watchSemaphoreBlocking(name, data, owners) }
        emit(watched.description())
        watched.changed().awaitTicketing(null)
    }
}

/**
 * The session's state now and at every change (DETACHED, ATTACHED,
 * EXPIRED); see [Session.addStateListener]. It completes after EXPIRED.
 */
fun Session.states(): Flow<Session.State> = callbackFlow {
    val listener = java.util.function.Consumer<Session.State> { st ->
        trySendBlocking(st)
        if (st == Session.State.EXPIRED) {
            channel.close()
        }
    }
    addStateListener(listener) // before the state is read, so that no change is missed (a repeat is dropped below)
    val now = state()
    trySendBlocking(now)
    if (now == Session.State.EXPIRED) {
        channel.close()
    }
    awaitClose { removeStateListener(listener) }
}.distinctUntilChanged()

/** Ends the hold on the server and here; see [Lease.releaseBlocking]. */
suspend fun Lease.release() {
    releaseAsync().awaitTicketing(null)
}

/** Waits until the hold ends and returns why; see [Lease.ended]. */
suspend fun Lease.awaitEnd(): RuntimeException = ended().awaitTicketing(null)

/** Waits for the lock; see [Mutex.lockBlocking]. Cancelling the coroutine withdraws the wait. */
suspend fun Mutex.lock(): Lease = lockAsync().awaitTicketing { it.releaseAsync() }

/** Takes the lock if it is free now, else null; see [Mutex.tryLockBlocking]. */
suspend fun Mutex.tryLock(): Lease? = tryLockAsync().awaitTicketing { it?.releaseAsync() }

/** Releases the lock; see [Mutex.unlockBlocking]. */
suspend fun Mutex.unlock() {
    unlockAsync().awaitTicketing(null)
}

/**
 * Waits until this session leads; see [Election.campaignBlocking]. Cancelling
 * the coroutine withdraws the campaign (a leadership won anyway is given up).
 */
suspend fun Election.campaign(data: ByteArray): Election.Leadership =
    campaignAsync(data).awaitTicketing { it.lease().releaseAsync() }

/** Gives up the leadership or withdraws the campaign; see [Election.resignBlocking]. */
suspend fun Election.resign() {
    resignAsync().awaitTicketing(null)
}

/** The current leader (session 0: nobody leads); see [Election.leaderBlocking]. */
suspend fun Election.leader(): Election.Leader = leaderAsync().awaitTicketing(null)

/** The leader at the start and at every change (session 0: nobody leads); see [Election.observe]. */
fun Election.leaders(): Flow<Election.Leader> = subscriptionFlow { observe(it) }

/** Registers [endpoint] until the lease is released or the session ends; see [Discovery.registerBlocking]. */
suspend fun Discovery.register(endpoint: ByteArray): Lease = registerAsync(endpoint).awaitTicketing { it.releaseAsync() }

/** The registered endpoints in registration order; see [Discovery.listBlocking]. */
suspend fun Discovery.list(): List<Discovery.Endpoint> = listAsync().awaitTicketing(null)

/** The endpoints at the start and at every change; see [Discovery.watch]. */
fun Discovery.endpoints(): Flow<List<Discovery.Endpoint>> = subscriptionFlow { watch(it) }

/** Publishes the value; see [Publication.publishBlocking]. */
suspend fun Publication.publish(value: ByteArray) {
    publishAsync(value).awaitTicketing(null)
}

/** The published value; see [Publication.getBlocking] (NotFoundException when unset). */
suspend fun Publication.get(): ByteArray = getAsync().awaitTicketing(null)

/** The value at the start and at every change (null: unset); see [Publication.watch]. */
fun Publication.values(): Flow<ByteArray?> = subscriptionFlow { watch(it) }

/**
 * A flow over a recipe's [Subscription]: each value the subscription's
 * callback is given, sent on with back pressure (a slow collector delays
 * only this subscription's thread); it completes when the subscription ends
 * after its session was closed, and fails with the cause when it ends
 * otherwise.
 */
private fun <T> subscriptionFlow(start: (java.util.function.Consumer<T>) -> Subscription): Flow<T> = callbackFlow {
    val sub = start(java.util.function.Consumer { v -> trySendBlocking(v) })
    sub.ended().whenComplete { cause, _ ->
        if (cause is io.ticketing.ClosedException) channel.close() else channel.close(cause)
    }
    awaitClose { sub.close() }
}
