package io.ticketing

import io.ticketing.coordination.AcquireOptions
import io.ticketing.coordination.CoordinationClient
import io.ticketing.coordination.NodeConfig
import io.ticketing.coordination.ReleasedException
import io.ticketing.coordination.Session
import io.ticketing.kotlin.acquire
import io.ticketing.kotlin.awaitEnd
import io.ticketing.kotlin.campaign
import io.ticketing.kotlin.createNode
import io.ticketing.kotlin.createSemaphore
import io.ticketing.kotlin.describeSemaphore
import io.ticketing.kotlin.dropNode
import io.ticketing.kotlin.endpoints
import io.ticketing.kotlin.leader
import io.ticketing.kotlin.leaders
import io.ticketing.kotlin.listSessions
import io.ticketing.kotlin.lock
import io.ticketing.kotlin.publish
import io.ticketing.kotlin.register
import io.ticketing.kotlin.release
import io.ticketing.kotlin.resign
import io.ticketing.kotlin.semaphoreChanges
import io.ticketing.kotlin.session
import io.ticketing.kotlin.states
import io.ticketing.kotlin.tryLock
import io.ticketing.kotlin.unlock
import io.ticketing.kotlin.values
import java.time.Duration
import io.ticketing.coordination.Discovery
import io.ticketing.coordination.Election
import io.ticketing.coordination.SemaphoreDescription
import kotlinx.coroutines.async
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertInstanceOf
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout

/** The coordination client's suspend functions and flows, against a real ticketd. */
@Timeout(120)
class CoordinationCoroutinesTest {
    companion object {
        private lateinit var cluster: Ticketd
        private lateinit var addr: String

        @JvmStatic
        @BeforeAll
        fun start() {
            cluster = Ticketd(1)
            addr = cluster.awaitLeader(30_000).addr
        }

        @JvmStatic
        @AfterAll
        fun stop() {
            cluster.close()
        }
    }

    /**
     * A mutex locked and unlocked, a lease released, and an election
     * campaigned for, followed through the leaders flow, all by suspend
     * functions; the lease's end is awaited.
     */
    @Test
    fun mutexAndElectionBySuspendFunctions(): Unit = runBlocking {
        TicketBroker.connect(addr).use { broker ->
            CoordinationClient.create(broker).use { c ->
                c.createNode("/kotlin/recipes", NodeConfig.defaults())
                val a = c.session("/kotlin/recipes", Duration.ofSeconds(10), "a")
                val b = c.session("/kotlin/recipes", Duration.ofSeconds(10), "b")
                try {
                    val lock = a.mutex("job")
                    val lease = lock.lock()
                    assertNull(b.mutex("job").tryLock(), "a holds the lock")
                    lock.unlock()
                    assertInstanceOf(ReleasedException::class.java, lease.awaitEnd())
                    val other = b.mutex("job").tryLock()
                    assertTrue(other != null && other.token() > lease.token())
                    other!!.release()

                    val leaders = Channel<Election.Leader>(Channel.UNLIMITED)
                    val observing = launch { a.election("primary").leaders().collect { leaders.send(it) } }
                    assertEquals(0L, next(leaders).session(), "nobody leads")
                    val won = b.election("primary").campaign("b".toByteArray())
                    val first = next(leaders)
                    assertEquals(b.id(), first.session())
                    assertEquals(won.token(), first.token())
                    assertEquals(b.id(), a.election("primary").leader().session())
                    b.election("primary").resign()
                    assertEquals(0L, next(leaders).session(), "nobody leads after the resignation")
                    observing.cancel()
                    assertEquals(listOf(a.id(), b.id()), c.listSessions("/kotlin/recipes").map { it.id() })
                } finally {
                    a.close()
                    b.close()
                }
                c.dropNode("/kotlin/recipes")
            }
        }
    }

    private suspend fun <T> next(ch: Channel<T>): T = withTimeout(30_000) { ch.receive() }

    /**
     * Discovery's, publication's, a semaphore's and a session's state flows
     * emit the current value first and then each change; the states flow
     * completes after EXPIRED.
     */
    @Test
    fun flowsOfDiscoveryPublicationSemaphoresAndStates(): Unit = runBlocking {
        TicketBroker.connect(addr).use { broker ->
            CoordinationClient.create(broker).use { c ->
                c.createNode("/kotlin/flows", NodeConfig.defaults())
                val w = c.session("/kotlin/flows", Duration.ofSeconds(10), "watcher")
                val m = c.session("/kotlin/flows", Duration.ofSeconds(10), "member")
                try {
                    val members = Channel<List<Discovery.Endpoint>>(Channel.UNLIMITED)
                    val j1 = launch { w.discovery("api").endpoints().collect { members.send(it) } }
                    assertEquals(0, next(members).size)
                    m.discovery("api").register("10.0.0.1:80".toByteArray())
                    assertArrayEquals("10.0.0.1:80".toByteArray(), next(members).single().data())
                    j1.cancel()

                    val values = Channel<ByteArray?>(Channel.UNLIMITED)
                    val j2 = launch { w.publication("cfg").values().collect { values.send(it) } }
                    assertNull(next(values), "unset")
                    m.publication("cfg").publish("v1".toByteArray())
                    assertArrayEquals("v1".toByteArray(), next(values))
                    j2.cancel()

                    m.createSemaphore("s", 2, ByteArray(0))
                    val descs = Channel<SemaphoreDescription>(Channel.UNLIMITED)
                    val j3 = launch { w.semaphoreChanges("s", data = false, owners = true).collect { descs.send(it) } }
                    assertEquals(0, next(descs).owners().size)
                    val held = m.acquire("s", AcquireOptions.shared())
                    assertEquals(held.token(), next(descs).owners().single().orderId())
                    j3.cancel()

                    val states = Channel<Session.State>(Channel.UNLIMITED)
                    val j4 = launch { m.states().collect { states.send(it) } }
                    assertEquals(Session.State.ATTACHED, next(states))
                    m.close()
                    assertEquals(Session.State.EXPIRED, next(states))
                    withTimeout(30_000) { j4.join() } // the flow completed
                } finally {
                    w.close()
                    m.close()
                }
                c.dropNode("/kotlin/flows")
            }
        }
    }

    /**
     * Cancelling a coroutine queued for a semaphore withdraws its wait: once
     * the holder releases, nobody holds the semaphore.
     */
    @Test
    fun cancellingAQueuedAcquireWithdrawsIt(): Unit = runBlocking {
        TicketBroker.connect(addr).use { broker ->
            CoordinationClient.create(broker).use { c ->
                c.createNode("/kotlin/cancel", NodeConfig.defaults())
                val a = c.session("/kotlin/cancel", Duration.ofSeconds(10), "a")
                val b = c.session("/kotlin/cancel", Duration.ofSeconds(10), "b")
                try {
                    a.createSemaphore("s", 1, ByteArray(0))
                    val held = a.acquire("s", AcquireOptions.exclusive())
                    val queued = async { b.acquire("s") }
                    withTimeout(30_000) { while (a.describeSemaphore("s").waiters().size != 1) delay(10) } // polled: waiters have no watch
                    queued.cancel()
                    withTimeout(30_000) { while (a.describeSemaphore("s").waiters().isNotEmpty()) delay(10) }
                    held.release()
                    assertTrue(a.describeSemaphore("s").owners().isEmpty(), "the cancelled acquire was not granted")
                } finally {
                    a.close()
                    b.close()
                }
                c.dropNode("/kotlin/cancel")
            }
        }
    }
}
