package io.ticketing;

import java.lang.reflect.Method;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The client's threads: virtual threads when the JDK has them (21 and newer),
 * daemon platform threads otherwise (JDK 17). The client is compiled for Java
 * 17, so it reaches {@code Thread.ofVirtual()} by reflection, once.
 */
final class Threads {
    private static final @Nullable ThreadFactory VIRTUAL = virtualFactory();
    private static final AtomicLong RELEASE_THREADS = new AtomicLong();

    private Threads() {}

    private static @Nullable ThreadFactory virtualFactory() {
        try {
            Method ofVirtual = Thread.class.getMethod("ofVirtual");
            Method factory = Class.forName("java.lang.Thread$Builder").getMethod("factory");
            return (ThreadFactory) factory.invoke(ofVirtual.invoke(null));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null; // before JDK 21
        }
    }

    /** Whether the client's threads are virtual (JDK 21 and newer). */
    static boolean virtual() {
        return VIRTUAL != null;
    }

    /** A new, not yet started thread running r, named name. */
    static Thread unstarted(String name, Runnable r) {
        Thread t;
        if (VIRTUAL != null) {
            t = VIRTUAL.newThread(r);
        } else {
            t = new Thread(r);
            t.setDaemon(true);
        }
        t.setName(name);
        return t;
    }

    /** Starts a new thread running r, named name. */
    static Thread start(String name, Runnable r) {
        Thread t = unstarted(name, r);
        t.start();
        return t;
    }

    /**
     * The executor of background releases when the application gives none: a
     * thread per release, virtual, or a cached pool of daemon platform threads.
     */
    static ExecutorService releaseExecutor() {
        ThreadFactory f = r -> unstarted("ticketing-release-" + RELEASE_THREADS.getAndIncrement(), r);
        if (VIRTUAL != null) {
            try {
                return (ExecutorService) Executors.class.getMethod("newThreadPerTaskExecutor", ThreadFactory.class).invoke(null, f);
            } catch (ReflectiveOperationException e) {
                // unreachable where Thread.ofVirtual() exists; a pool does the same job
            }
        }
        return Executors.newCachedThreadPool(f);
    }
}
