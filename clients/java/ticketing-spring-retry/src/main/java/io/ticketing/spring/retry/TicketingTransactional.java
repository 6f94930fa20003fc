package io.ticketing.spring.retry;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.core.annotation.AliasFor;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Transactional;

/**
 * A {@link Transactional} method (or every method of a class) with its own
 * retry settings. Plain {@code @Transactional} methods are retried with the
 * global settings ({@code ticketing.transaction.retry.*}); this annotation is
 * needed only to change them for one method.
 *
 * <p>{@code 0} means "the global value"; negative values are rejected when the
 * method is called ({@link IllegalArgumentException}). Locally, retrying can
 * only be disabled: {@code enabled = true} does not turn it on when it is off
 * globally. Unlike plain {@code @Transactional}, every exception rolls the
 * transaction back, checked ones ({@code SQLException}, the fence's
 * {@code StaleTokenException}) included.
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@Documented
@Transactional(rollbackFor = Exception.class)
public @interface TicketingTransactional {
    /**
     * The transaction's isolation level ({@link Transactional#isolation()}).
     *
     * @return the isolation level; the database's default unless set
     */
    @AliasFor(annotation = Transactional.class, attribute = "isolation")
    Isolation isolation() default Isolation.DEFAULT;

    /**
     * Whether this method is retried (only disables).
     *
     * @return false to disable retries here
     */
    boolean enabled() default true;

    /**
     * Most executions, the first included; 1 = no retries; 0 = global.
     *
     * @return the most executions
     */
    int maxAttempts() default 0;

    /**
     * The method is safe to run twice: also retried when the outcome of the
     * failed attempt is unknown (UNDETERMINED, TRANSPORT_UNAVAILABLE,
     * CLIENT_TRANSPORT_ERROR, SESSION_EXPIRED).
     * @return true when running it twice is safe
     */
    boolean idempotent() default false;

    /**
     * Base of the slow backoff tier in ms; 0 = global.
     *
     * @return the base in ms
     */
    long slowBackoffBaseMs() default 0;

    /**
     * Base of the fast backoff tier in ms; 0 = global.
     *
     * @return the base in ms
     */
    long fastBackoffBaseMs() default 0;

    /**
     * Cap of the slow backoff tier in ms; 0 = global.
     *
     * @return the cap in ms
     */
    long slowCapBackoffMs() default 0;

    /**
     * Cap of the fast backoff tier in ms; 0 = global.
     *
     * @return the cap in ms
     */
    long fastCapBackoffMs() default 0;
}
