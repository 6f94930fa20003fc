package io.ticketing;

/** The ticket was granted, but so late that its conservative remaining time is below the work budget (or not positive). The client released it in the background; do not enter the critical section. */
public final class BudgetExceededException extends TicketingException {
    BudgetExceededException(String message) {
        super(message, null, 0);
    }

    BudgetExceededException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
