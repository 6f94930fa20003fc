package io.ticketing.examples.orders;

/** An order as the API shows it. */
public record Order(String id, long amountCents, String status, String paidBy, Long paidToken) {}
