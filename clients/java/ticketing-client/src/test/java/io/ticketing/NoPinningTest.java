package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * On Java 21 a virtual thread that blocks inside a {@code synchronized}
 * block or method pins its carrier thread. The client promises that its
 * blocking calls never do (only ReentrantLock, Condition, Semaphore and
 * CompletableFuture), so the client's sources must not use the keyword.
 */
class NoPinningTest {
    @Test
    void theClientNeverUsesSynchronized() throws Exception {
        Path src = Path.of("src/main/java");
        assertTrue(Files.isDirectory(src), "run from the module directory (Maven does)");
        List<String> offenders;
        try (Stream<Path> files = Files.walk(src)) {
            offenders = files.filter(p -> p.toString().endsWith(".java")).filter(p -> {
                try {
                    // comments may mention it; code may not
                    return Files.readAllLines(p).stream().map(String::trim)
                            .filter(l -> !l.startsWith("*") && !l.startsWith("//") && !l.startsWith("/*"))
                            .anyMatch(l -> l.matches(".*\\bsynchronized\\b.*"));
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).map(Path::toString).toList();
        }
        assertEquals(List.of(), offenders, "synchronized pins virtual threads on Java 21: use ReentrantLock");
    }
}
