/**
 * Suspend functions for Kotlin coroutines on the one [TicketBroker]: the same
 * broker and connection as the blocking and CompletableFuture calls.
 *
 * ```
 * import io.ticketing.kotlin.*
 *
 * val broker = TicketBroker.connect("127.0.0.1:5225")
 * broker.waitReady(Duration.ofSeconds(5))
 *
 * val ticket = broker.acquire("key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))
 * val token = ticket.token
 * // In the same DB transaction: verify/update token high-water and perform the business write.
 * ticket.release()
 * ```
 *
 * Cancellation follows the client's rules: a coroutine cancelled before the
 * request was sent sends nothing; one cancelled after the request may have been
 * sent makes the client send a cancel (`C`), and a grant that arrives anyway is
 * released in the background with its exact token — also when the grant had
 * already arrived but the cancelled coroutine could no longer take it.
 */
@file:JvmName("TicketingCoroutines")

package io.ticketing.kotlin

import io.ticketing.Description
import io.ticketing.NotHeldException
import io.ticketing.Ticket
import io.ticketing.TicketBroker
import io.ticketing.TicketingException
import java.time.Duration
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlin.coroutines.resumeWithException

/** Suspends until the broker is connected to the leader; see [TicketBroker.waitReadyBlocking]. */
suspend fun TicketBroker.waitReady(timeout: Duration) {
    waitReadyAsync(timeout).awaitTicketing(null)
}

/**
 * Asks for the ticket of [key]; see [TicketBroker.acquireBlocking] for the
 * arguments (wait 0..255 s, lease 1..250 s, budget at most lease × 0.99 − 0.1 s,
 * rounded up to whole seconds, rejected before sending when out of range) and
 * the outcomes.
 * Cancelling the coroutine cancels the acquire as described above.
 */
suspend fun TicketBroker.acquire(key: String, wait: Duration, lease: Duration, budget: Duration): Ticket =
    acquireAsync(key, wait, lease, budget).awaitTicketing { it.close() }

/** Releases [key]'s ticket if [token] still holds it; see [TicketBroker.releaseTokenBlocking]. */
suspend fun TicketBroker.releaseToken(key: String, token: Long) {
    releaseTokenAsync(key, token).awaitTicketing(null)
}

/** Reads the state of [key]; see [TicketBroker.describeBlocking]. */
suspend fun TicketBroker.describe(key: String): Description = describeAsync(key).awaitTicketing(null)

/**
 * Releases the ticket and reports the outcome: returns when the server answered
 * `R`; throws [NotHeldException] for `N` and another [TicketingException] when
 * no final answer came within [TicketBroker.RELEASE_BOUND] (never presumed
 * success). See [Ticket.releaseBlocking].
 */
suspend fun Ticket.release() {
    releaseAsync().awaitTicketing(null)
}

/**
 * Awaits the future; cancelling the coroutine cancels the future (which the
 * client turns into "nothing sent" or a cancel frame). A value that arrives
 * but can no longer be delivered to the cancelled coroutine goes to [orphan]
 * (a ticket: released in the background), so that no grant is lost.
 */
internal suspend fun <T : Any?> CompletableFuture<T>.awaitTicketing(orphan: ((T) -> Unit)?): T =
    suspendCancellableCoroutine { cont ->
        cont.invokeOnCancellation { cancel(true) }
        whenComplete { v, e ->
            if (e == null) {
                cont.resume(v) { _, value, _ -> if (orphan != null && value != null) orphan(value) }
            } else if (!isCancelled) {
                cont.resumeWithException(if (e is CompletionException && e.cause != null) e.cause!! else e)
            }
        }
    }
