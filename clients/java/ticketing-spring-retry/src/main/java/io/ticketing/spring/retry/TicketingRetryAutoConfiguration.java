package io.ticketing.spring.retry;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.BeanDefinitionRegistryPostProcessor;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;
import org.springframework.transaction.interceptor.TransactionAttributeSource;
import org.springframework.transaction.interceptor.TransactionInterceptor;

/**
 * Replaces Spring's {@code transactionInterceptor} bean with a
 * {@link RetryingTransactionInterceptor} reading the same transaction
 * attributes, so that every {@code @Transactional} and
 * {@link TicketingTransactional} method is retried at its outermost
 * transaction boundary. Settings: {@code ticketing.transaction.retry.*}
 * ({@link TransactionRetryProperties}); negative values stop the application.
 *
 * <p>The bean definition is replaced before any bean is created (the
 * interceptor is infrastructure that other post-processors create early). The
 * replacement uses the application's default transaction manager, as Spring's
 * interceptor does when no {@code TransactionManagementConfigurer} names one.
 * With Micrometer on the classpath, retries are counted in the application's
 * {@code MeterRegistry} ({@link MicrometerRetryObserver}).
 */
@AutoConfiguration
@ConditionalOnClass(TransactionInterceptor.class)
public class TicketingRetryAutoConfiguration {
    /** The bean name Spring gives its transaction interceptor. */
    public static final String INTERCEPTOR_BEAN = "transactionInterceptor";

    /** The auto-configuration. */
    public TicketingRetryAutoConfiguration() {}

    @Bean
    static BeanDefinitionRegistryPostProcessor ticketingTransactionInterceptorReplacer() {
        return new Replacer();
    }

    private static final String METER_REGISTRY = "io.micrometer.core.instrument.MeterRegistry";

    /** Kept apart so that Micrometer's classes are loaded only when Micrometer is there. */
    static final class Metrics {
        private Metrics() {}

        static RetryObserver observer(ConfigurableListableBeanFactory bf) {
            return new MicrometerRetryObserver(() -> bf.getBeanProvider(io.micrometer.core.instrument.MeterRegistry.class).getIfUnique());
        }
    }

    static final class Replacer implements BeanDefinitionRegistryPostProcessor {
        @Override
        public void postProcessBeanDefinitionRegistry(BeanDefinitionRegistry registry) {
            // the definitions are complete only in postProcessBeanFactory
        }

        @Override
        public void postProcessBeanFactory(ConfigurableListableBeanFactory bf) throws BeansException {
            if (!(bf instanceof BeanDefinitionRegistry registry) || !registry.containsBeanDefinition(INTERCEPTOR_BEAN)) {
                return;
            }
            registry.removeBeanDefinition(INTERCEPTOR_BEAN);
            RootBeanDefinition d = new RootBeanDefinition(RetryingTransactionInterceptor.class);
            d.setRole(BeanDefinition.ROLE_INFRASTRUCTURE);
            d.setInstanceSupplier(() -> {
                TransactionRetryProperties p = Binder.get(bf.getBean(Environment.class))
                        .bind("ticketing.transaction.retry", TransactionRetryProperties.class)
                        .orElseGet(TransactionRetryProperties::new);
                RetryingTransactionInterceptor r = new RetryingTransactionInterceptor(p);
                if (ClassUtils.isPresent(METER_REGISTRY, bf.getBeanClassLoader())) {
                    r.setRetryObserver(Metrics.observer(bf));
                }
                r.setTransactionAttributeSource(bf.containsBean("transactionAttributeSource")
                        ? bf.getBean("transactionAttributeSource", TransactionAttributeSource.class)
                        : bf.getBean(TransactionAttributeSource.class));
                return r;
            });
            registry.registerBeanDefinition(INTERCEPTOR_BEAN, d);
        }
    }
}
