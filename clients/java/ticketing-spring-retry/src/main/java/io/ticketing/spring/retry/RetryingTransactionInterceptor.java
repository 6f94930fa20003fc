package io.ticketing.spring.retry;

import java.lang.reflect.Method;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.transaction.interceptor.TransactionAttributeSource;
import org.springframework.transaction.interceptor.TransactionInterceptor;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Spring's transaction interceptor with retries: an invocation that starts
 * the outermost transaction (no transaction is active on the thread yet) is
 * run again, as a whole new transaction, when it fails with a retryable
 * {@link RetryClass}, up to the method's attempts, with the class's backoff.
 * Methods that join a running transaction ({@code REQUIRED} inside another
 * one) are never retried on their own: their failure reaches the outermost
 * boundary, which re-runs the whole transaction. A failure after the
 * method's body returned (while committing) that is not classified otherwise
 * counts as UNDETERMINED: the commit may have happened, so only idempotent
 * methods are run again.
 */
public class RetryingTransactionInterceptor extends TransactionInterceptor {
    private static final long serialVersionUID = 1L;
    private static final ThreadLocal<Boolean> RETRYING = new ThreadLocal<>();

    private final transient TransactionRetryProperties properties;
    private final transient ConcurrentHashMap<Method, RetrySettings> settings = new ConcurrentHashMap<>();

    public RetryingTransactionInterceptor(TransactionRetryProperties properties) {
        properties.validate();
        this.properties = properties;
    }

    @Override
    public Object invoke(MethodInvocation invocation) throws Throwable {
        if (!(invocation instanceof ProxyMethodInvocation pmi)
                || RETRYING.get() != null
                || TransactionSynchronizationManager.isActualTransactionActive()) {
            return super.invoke(invocation); // not the outermost boundary
        }
        Class<?> targetClass = invocation.getThis() != null ? AopUtils.getTargetClass(invocation.getThis()) : null;
        Method method = AopUtils.getMostSpecificMethod(invocation.getMethod(), targetClass);
        TransactionAttributeSource tas = getTransactionAttributeSource();
        if (tas == null || tas.getTransactionAttribute(method, targetClass) == null) {
            return super.invoke(invocation);
        }
        RetrySettings s = settingsOf(method, targetClass);
        if (!s.enabled() || s.maxAttempts() <= 1) {
            return super.invoke(invocation);
        }
        RETRYING.set(Boolean.TRUE);
        try {
            for (int attempt = 1; ; attempt++) {
                Body body = new Body(pmi.invocableClone());
                try {
                    return super.invoke(body);
                } catch (Throwable t) {
                    RetryClass c = RetryClassifier.classify(t);
                    if (body.returned && c == RetryClass.NON_RETRYABLE) {
                        // The method's body succeeded and finishing the transaction failed for a reason
                        // that does not say the commit was refused: its outcome is unknown.
                        c = RetryClass.UNDETERMINED;
                    }
                    if (!c.retryable(s.idempotent()) || attempt >= s.maxAttempts()) {
                        throw t;
                    }
                    long d = s.delayMs(c, attempt);
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
            RETRYING.remove();
        }
    }

    /** The invocation, noting whether the method's body returned (so that a later failure is the commit's). */
    private static final class Body implements MethodInvocation {
        private final MethodInvocation inv;
        boolean returned;

        Body(MethodInvocation inv) {
            this.inv = inv;
        }

        @Override
        public Object proceed() throws Throwable {
            Object r = inv.proceed();
            returned = true;
            return r;
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
        public Object getThis() {
            return inv.getThis();
        }

        @Override
        public java.lang.reflect.AccessibleObject getStaticPart() {
            return inv.getStaticPart();
        }
    }

    private RetrySettings settingsOf(Method method, Class<?> targetClass) {
        return settings.computeIfAbsent(method, m -> {
            TicketingTransactional a = AnnotatedElementUtils.findMergedAnnotation(m, TicketingTransactional.class);
            if (a == null && targetClass != null) {
                a = AnnotatedElementUtils.findMergedAnnotation(targetClass, TicketingTransactional.class);
            }
            return RetrySettings.of(properties, a, (targetClass != null ? targetClass.getName() : "?") + "." + m.getName());
        });
    }
}
