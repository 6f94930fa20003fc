package io.ticketing.examples.orders;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * Paying an order exactly once, from any instance: the Spring Boot version of
 * the repository's server/examples/orders. Settings: spring.datasource.* (PostgreSQL),
 * ticketing.addrs (and ticketing.token, ticketing.tls.*), orders.instance.
 */
@SpringBootApplication
public class OrdersApplication {
    public static void main(String[] args) {
        SpringApplication.run(OrdersApplication.class, args);
    }
}
