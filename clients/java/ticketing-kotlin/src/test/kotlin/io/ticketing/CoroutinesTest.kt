package io.ticketing

import io.ticketing.kotlin.acquire
import io.ticketing.kotlin.describe
import io.ticketing.kotlin.release
import io.ticketing.kotlin.releaseToken
import io.ticketing.kotlin.waitReady
import io.ticketing.wire.Frame
import io.ticketing.wire.Type
import java.time.Duration
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import org.junit.jupiter.api.assertThrows

/** The suspend API: against a real ticketd, and its cancellation rules against the fake server. */
@Timeout(120)
class CoroutinesTest {
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

    /** The document's Kotlin example, as written. */
    @Test
    fun theDocumentsKotlinExampleWorksAsWritten(): Unit = runBlocking {
        val broker = TicketBroker.connect(addr)
        try {
            broker.waitReady(Duration.ofSeconds(5))

            val ticket = broker.acquire("key", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))
            val token = ticket.token
            // In the same DB transaction: verify/update token high-water and perform the business write.
            ticket.release()

            assertTrue(token > 0)
            assertFalse(broker.describe("key").held)
            assertThrows<NotHeldException> { runBlocking { broker.releaseToken("key", token) } }
        } finally {
            broker.close()
        }
    }

    @Test
    fun useReleasesInTheBackgroundAndTokensIncrease(): Unit = runBlocking {
        TicketBroker.connect(addr).use { broker ->
            var last = 0L
            repeat(3) {
                broker.acquire("use", Duration.ofSeconds(10), Duration.ofSeconds(30), Duration.ZERO).use { t ->
                    assertTrue(t.token > last)
                    last = t.token
                }
            }
            // Many coroutines share the one broker.
            val tokens = (1..50).map { i ->
                async {
                    val t = broker.acquire("co-$i", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ZERO)
                    t.release()
                    t.token
                }
            }.awaitAll()
            assertEquals(50, tokens.toSet().size)
        }
    }

    @Test
    fun cancellingAQueuedAcquireAgainstTheRealServerWithdrawsIt(): Unit = runBlocking {
        TicketBroker.connect(addr).use { broker ->
            val holder = broker.acquire("k-cancel", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO)
            val r = withTimeoutOrNull(300) {
                broker.acquire("k-cancel", Duration.ofSeconds(60), Duration.ofSeconds(30), Duration.ZERO)
            }
            assertNull(r)
            val end = System.nanoTime() + 20_000_000_000L
            while (broker.describe("k-cancel").waiters != 0L) {
                assertTrue(System.nanoTime() < end, "the cancel did not withdraw the waiter")
                delay(10)
            }
            holder.release()
            assertFalse(broker.describe("k-cancel").held)
        }
    }

    @Test
    fun cancelledAfterSendSendsCancelAndReleasesTheLateGrantExactly() {
        val srv = FakeServer { s, _ ->
            s.hello()
            while (true) {
                val f = s.readRequest()
                when (f.type) {
                    Type.CANCEL -> s.send(FakeServer.granted(f.id, 777, 30000, 0))
                    Type.RELEASE -> s.send(FakeServer.idOnly(Type.RELEASED, f.id))
                }
            }
        }
        srv.use {
            val released = CopyOnWriteArrayList<Long>()
            TicketBroker.builder().addrs(srv.addr()).releaseObserver { _, token, err -> if (err == null) released.add(token) }.connect().use { b ->
                runBlocking {
                    assertThrows<TimeoutCancellationException> {
                        runBlocking {
                            withTimeout(500) { b.acquire("k", Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ZERO) }
                        }
                    }
                }
                val a = srv.await(1, FakeServer.type(Type.ACQUIRE))[0]
                val c = srv.await(1, FakeServer.type(Type.CANCEL))[0]
                assertEquals(a.id, c.id)
                assertArrayEquals(a.owner, c.owner)
                assertEquals(777L, srv.await(1, FakeServer.type(Type.RELEASE))[0].token)
                val end = System.nanoTime() + 20_000_000_000L
                while (released.isEmpty()) {
                    assertTrue(System.nanoTime() < end)
                    Thread.sleep(5)
                }
                assertEquals(listOf(777L), released.toList())
            }
        }
    }

    @Test
    fun cancelledBeforeSendSendsNothing() {
        val letHello = CountDownLatch(1)
        val locks = FakeServer.Locks()
        val srv = FakeServer { s, _ ->
            letHello.await()
            s.hello()
            locks.serve(s)
        }
        srv.use {
            TicketBroker.connect(srv.addr()).use { b ->
                runBlocking {
                    val job = launch { b.acquire("k", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ZERO) }
                    delay(50) // let it reach the wait for the connection; the outcome does not depend on it
                    job.cancel(CancellationException("test"))
                    job.join()
                    assertTrue(job.isCancelled)
                }
                letHello.countDown()
                runBlocking {
                    b.waitReady(Duration.ofSeconds(10))
                    b.describe("probe")
                }
                srv.await(1, FakeServer.type(Type.DESCRIBE))
                assertEquals(0, srv.received(FakeServer.type(Type.ACQUIRE)).size, "a cancelled acquire was sent")
            }
        }
    }

    @Test
    fun outcomesAreTheClientsExceptions() {
        val locks = FakeServer.Locks()
        val srv = FakeServer { s, _ ->
            s.hello()
            locks.serve(s)
        }
        srv.use {
            TicketBroker.connect(srv.addr()).use { b ->
                runBlocking {
                    val t = b.acquire("k", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO)
                    assertThrows<NotAcquiredException> { runBlocking { b.acquire("k", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO) } }
                    assertThrows<InvalidArgumentException> { runBlocking { b.acquire("", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO) } }
                    b.releaseToken("k", t.token)
                    assertThrows<NotHeldException> { runBlocking { t.release() } }
                }
            }
        }
    }
}

