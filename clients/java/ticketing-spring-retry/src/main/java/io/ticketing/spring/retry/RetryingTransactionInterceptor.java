package io.ticketing.spring.retry;

import java.lang.reflect.Method;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.intercept.MethodInvocation;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.transaction.interceptor.DelegatingTransactionAttribute;
import org.springframework.transaction.interceptor.TransactionAttribute;
import org.springframework.transaction.interceptor.TransactionAttributeSource;
import org.springframework.transaction.interceptor.TransactionInterceptor;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Spring's transaction interceptor with retries: an invocation that starts
 * a transaction while none is active on the thread (the outermost
 * transaction, also one called from a method that runs without a
 * transaction, propagation {@code SUPPORTS} or {@code NOT_SUPPORTED}) is
 * run again, as a whole new transaction, when it fails with a retryable
 * {@link RetryClass}, up to the method's attempts, with the class's backoff.
 *
 * <p>A committed transaction is never run again. What happened to the failed
 * attempt's transaction is taken from the database when a SQLSTATE says it,
 * and otherwise from Spring itself (a transaction synchronization registered
 * when the method's body starts sees the transaction complete), so the
 * method's rollback rules ({@code rollbackFor}, {@code noRollbackFor}; by
 * default a checked exception commits) decide as they decide for Spring:
 *
 * <ul>
 *   <li>rolled back, or never begun: retried when the failure's class is retried
 *       ({@link RetryClass#retryable(boolean)});
 *   <li>committed (a checked exception under the default rules, or a
 *       {@code noRollbackFor} exception): never retried, the exception is
 *       thrown as it is;
 *   <li>outcome unknown (the commit failed and so did the rollback after it,
 *       typically a connection lost during COMMIT), or no transaction was
 *       open around the body (propagation {@code SUPPORTS},
 *       {@code NOT_SUPPORTED}: its statements committed one by one): retried
 *       only for a method marked idempotent, as UNDETERMINED unless the
 *       failure's own class says more.
 * </ul>
 *
 * <p>A serialization failure (SQLSTATE 40001) or a deadlock (40P01) anywhere
 * in the failure's cause chain means the database rolled the whole
 * transaction back, whatever Spring would otherwise conclude: such a failure
 * thrown by the body rolls the transaction back under any rollback rules (a
 * checked {@code SQLException} from raw JDBC included: committing would only
 * have PostgreSQL answer COMMIT with ROLLBACK, and Spring would report a
 * commit), and one thrown by the commit itself (a plain
 * {@code DataSourceTransactionManager} reports it as a
 * {@code TransactionSystemException}) counts as rolled back, not unknown.
 *
 * <p>Methods that join a running transaction ({@code REQUIRED} inside another
 * one) are never retried on their own: their failure reaches the outermost
 * boundary, which re-runs the whole transaction. A failure whose attempts an
 * inner boundary used up is not retried again by a boundary around it.
 *
 * <p>Each retry is logged at DEBUG (method, class, attempt, delay) and a
 * failure that used up the attempts at WARN, under this class's logger; an
 * optional {@link RetryObserver} (the Micrometer one when Micrometer is
 * present) sees the same events.
 */
public class RetryingTransactionInterceptor extends TransactionInterceptor {
    private static final long serialVersionUID = 1L;
    private static final Log log = LogFactory.getLog(RetryingTransactionInterceptor.class);
    /** How many retry loops run on this thread, and the failure one of them gave up on after its last attempt. */
    private static final ThreadLocal<Loops> LOOPS = ThreadLocal.withInitial(Loops::new);

    private static final class Loops {
        int depth;
        @Nullable Throwable exhausted;
    }

    private final transient TransactionRetryProperties properties;
    private final transient ConcurrentHashMap<Target, RetrySettings> settings = new ConcurrentHashMap<>();
    private transient RetryObserver observer = RetryObserver.NONE;
    private transient volatile @Nullable RolledBackByDatabase source;

    /**
     * An interceptor with the given global settings.
     *
     * @param properties the global settings; negative values are refused
     * @throws IllegalArgumentException when a setting is negative
     */
    public RetryingTransactionInterceptor(TransactionRetryProperties properties) {
        properties.validate();
        this.properties = properties;
    }

    /**
     * Sets who is told of every retry and of every failure that used up its attempts.
     *
     * @param observer the observer; null for none
     */
    public void setRetryObserver(@Nullable RetryObserver observer) {
        this.observer = observer != null ? observer : RetryObserver.NONE;
    }

    /** A bean class and one of its methods: settings differ between two beans sharing an inherited method. */
    private record Target(Method method, @Nullable Class<?> targetClass) {}

    /** What became of one attempt's transaction. */
    enum Outcome {
        /** The body was never reached: no transaction was begun, nothing was applied. */
        NOT_BEGUN,
        /** Spring rolled the transaction back. */
        ROLLED_BACK,
        /** Spring committed the transaction. */
        COMMITTED,
        /** Nobody knows: the commit failed and so did the rollback, or the body ran outside a transaction. */
        UNKNOWN
    }

    /**
     * The transaction attributes, with the rule that a failure the database
     * rolled back (SQLSTATE 40001, 40P01 in its cause chain) rolls the
     * transaction back under any rollback rules.
     */
    @Override
    public @Nullable TransactionAttributeSource getTransactionAttributeSource() {
        TransactionAttributeSource tas = super.getTransactionAttributeSource();
        if (tas == null) {
            return null;
        }
        RolledBackByDatabase s = source;
        if (s == null || s.source() != tas) {
            s = new RolledBackByDatabase(tas);
            source = s;
        }
        return s;
    }

    /** Transaction attributes whose rollback rules give way to the database's own rollback. */
    private record RolledBackByDatabase(TransactionAttributeSource source) implements TransactionAttributeSource {
        @Override
        public boolean isCandidateClass(Class<?> targetClass) {
            return source.isCandidateClass(targetClass);
        }

        @Override
        public @Nullable TransactionAttribute getTransactionAttribute(Method method, @Nullable Class<?> targetClass) {
            TransactionAttribute a = source.getTransactionAttribute(method, targetClass);
            if (a == null) {
                return null;
            }
            return new DelegatingTransactionAttribute(a) {
                private static final long serialVersionUID = 1L;

                @Override
                public boolean rollbackOn(Throwable ex) {
                    return RetryClassifier.rolledBackByDatabase(ex) || super.rollbackOn(ex);
                }
            };
        }
    }

    @Override
    public @Nullable Object invoke(MethodInvocation invocation) throws Throwable {
        if (!(invocation instanceof ProxyMethodInvocation)
                || TransactionSynchronizationManager.isActualTransactionActive()) {
            return super.invoke(invocation); // joins or suspends a running transaction: its outermost boundary retries
        }
        ProxyMethodInvocation pmi = (ProxyMethodInvocation) invocation;
        Class<?> targetClass = invocation.getThis() != null ? AopUtils.getTargetClass(invocation.getThis()) : null;
        Method method = AopUtils.getMostSpecificMethod(invocation.getMethod(), targetClass);
        TransactionAttributeSource tas = getTransactionAttributeSource();
        TransactionAttribute attribute = tas != null ? tas.getTransactionAttribute(method, targetClass) : null;
        if (attribute == null) {
            return super.invoke(invocation);
        }
        RetrySettings s = settingsOf(method, targetClass);
        if (!s.enabled() || s.maxAttempts() <= 1) {
            return super.invoke(invocation);
        }
        String where = (targetClass != null ? targetClass.getSimpleName() : method.getDeclaringClass().getSimpleName())
                + "." + method.getName();
        Loops loops = LOOPS.get();
        loops.depth++;
        try {
            for (int attempt = 1; ; attempt++) {
                Body body = new Body(pmi.invocableClone());
                try {
                    return super.invoke(body);
                } catch (Throwable t) {
                    RetryClass c = RetryClassifier.classify(t);
                    Outcome outcome = body.outcome(attribute, t);
                    if (loops.exhausted != null && causedBy(t, loops.exhausted)) {
                        if (log.isDebugEnabled()) {
                            log.debug(where + " failed (" + c + ") on attempt " + attempt
                                    + "; not retried: an inner transaction used up its attempts on it: " + t);
                        }
                        throw t;
                    }
                    boolean retry = switch (outcome) {
                        case NOT_BEGUN, ROLLED_BACK -> c.retryable(s.idempotent());
                        case COMMITTED -> false;
                        case UNKNOWN -> {
                            if (c == RetryClass.NON_RETRYABLE) {
                                c = RetryClass.UNDETERMINED; // the failure itself says nothing, the commit may have happened
                            }
                            yield s.idempotent() && c.retryable(true);
                        }
                    };
                    if (!retry) {
                        if (c.retryable(s.idempotent()) && log.isDebugEnabled()) {
                            log.debug(where + " failed (" + c + ") on attempt " + attempt + "; not retried: its transaction "
                                    + outcome.name().toLowerCase(java.util.Locale.ROOT) + ": " + t);
                        }
                        throw t;
                    }
                    if (attempt >= s.maxAttempts()) {
                        log.warn(where + " failed (" + c + ") on its last attempt, " + attempt + " of " + s.maxAttempts()
                                + "; giving up: " + t);
                        observer.exhausted(where, c, attempt);
                        loops.exhausted = t;
                        throw t;
                    }
                    long d = s.delayMs(c, attempt);
                    if (log.isDebugEnabled()) {
                        log.debug("retrying " + where + " (" + c + ", transaction " + outcome.name().toLowerCase(java.util.Locale.ROOT)
                                + "): attempt " + (attempt + 1) + " of " + s.maxAttempts() + " in " + d + " ms after " + t);
                    }
                    observer.retrying(where, c, attempt + 1);
                    if (d > 0) {
                        try {
                            Thread.sleep(d);
                        } catch (InterruptedException ie) {
                            Thread.currentThread().interrupt();
                            t.addSuppressed(ie);
                            throw t;
                        }
                    }
                }
            }
        } finally {
            if (--loops.depth == 0) {
                LOOPS.remove();
            }
        }
    }

    /** Whether cause is t or one of t's causes. */
    private static boolean causedBy(Throwable t, Throwable cause) {
        for (int i = 0; t != null && i < 64; i++, t = t.getCause()) {
            if (t == cause) {
                return true;
            }
        }
        return false;
    }

    /**
     * The invocation, noting whether the method's body ran inside a transaction
     * and how Spring completed that transaction.
     */
    private static final class Body implements MethodInvocation, TransactionSynchronization {
        private final MethodInvocation inv;
        private boolean entered;
        private boolean inTransaction;
        private boolean synchronizedWithSpring;
        private @Nullable Throwable thrownByBody;
        private int completion = -1;

        Body(MethodInvocation inv) {
            this.inv = inv;
        }

        @Override
        public @Nullable Object proceed() throws Throwable {
            entered = true;
            inTransaction = TransactionSynchronizationManager.isActualTransactionActive();
            if (inTransaction && TransactionSynchronizationManager.isSynchronizationActive()) {
                TransactionSynchronizationManager.registerSynchronization(this);
                synchronizedWithSpring = true;
            }
            try {
                return inv.proceed();
            } catch (Throwable t) {
                thrownByBody = t;
                throw t;
            }
        }

        @Override
        public void afterCompletion(int status) {
            completion = status;
        }

        Outcome outcome(TransactionAttribute attribute, Throwable thrown) {
            if (!entered) {
                return Outcome.NOT_BEGUN;
            }
            if (!inTransaction) {
                return Outcome.UNKNOWN; // statements committed one by one; a 40001 undid only its own
            }
            boolean rolledBackByDatabase = RetryClassifier.rolledBackByDatabase(thrown);
            if (synchronizedWithSpring) {
                return switch (completion) {
                    // Never after a failure of the body's with 40001/40P01: those roll back (the attributes' rule).
                    case STATUS_COMMITTED -> Outcome.COMMITTED;
                    case STATUS_ROLLED_BACK -> Outcome.ROLLED_BACK;
                    // The commit failed: with 40001/40P01 the database says it rolled back.
                    default -> rolledBackByDatabase ? Outcome.ROLLED_BACK : Outcome.UNKNOWN;
                };
            }
            // A transaction manager without synchronization: Spring's own rule for the body's exception.
            if (thrown == thrownByBody) {
                return attribute.rollbackOn(thrown) ? Outcome.ROLLED_BACK : Outcome.COMMITTED;
            }
            return rolledBackByDatabase ? Outcome.ROLLED_BACK : Outcome.UNKNOWN; // the commit (or the rollback) failed
        }

        @Override
        public Method getMethod() {
            return inv.getMethod();
        }

        @Override
        public Object[] getArguments() {
            return inv.getArguments();
        }

        @Override
        public @Nullable Object getThis() {
            return inv.getThis();
        }

        @Override
        public java.lang.reflect.AccessibleObject getStaticPart() {
            return inv.getStaticPart();
        }
    }

    private RetrySettings settingsOf(Method method, @Nullable Class<?> targetClass) {
        return settings.computeIfAbsent(new Target(method, targetClass), k -> {
            TicketingTransactional a = AnnotatedElementUtils.findMergedAnnotation(method, TicketingTransactional.class);
            if (a == null && targetClass != null) {
                a = AnnotatedElementUtils.findMergedAnnotation(targetClass, TicketingTransactional.class);
            }
            return RetrySettings.of(properties, a, (targetClass != null ? targetClass.getName() : "?") + "." + method.getName());
        });
    }
}
