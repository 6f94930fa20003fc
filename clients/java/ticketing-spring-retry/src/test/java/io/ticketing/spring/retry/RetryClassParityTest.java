package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The enum is the Go retry package's class list, read from this repository:
 * the same names in the same order (retry/class.go's classNames), and the
 * same "retried" rule and backoff tier for each (retry/doc.go's table; a
 * class the table does not list is never retried).
 */
class RetryClassParityTest {
    static Path repo() {
        return Path.of(System.getProperty("ticketing.repo.root", "../../..")).toAbsolutePath().normalize();
    }

    @Test
    void namesAndOrderAreTheGoPackages() throws Exception {
        String src = Files.readString(repo().resolve("retry/class.go"));
        String names = src.substring(src.indexOf("var classNames"), src.indexOf("}", src.indexOf("var classNames")));
        Matcher m = Pattern.compile(":\\s*\"([A-Z_]+)\"").matcher(names);
        List<String> goNames = new ArrayList<>();
        while (m.find()) {
            goNames.add(m.group(1));
        }
        List<String> javaNames = new ArrayList<>();
        for (RetryClass c : RetryClass.values()) {
            javaNames.add(c.name());
        }
        assertTrue(goNames.size() > 10, "could not read the class names from retry/class.go: " + goNames);
        assertEquals(goNames, javaNames);
    }

    @Test
    void retriedAndTiersAreTheGoTable() throws Exception {
        // //	ABORTED                    always              fast
        Map<String, String[]> table = new LinkedHashMap<>();
        Pattern row = Pattern.compile("^//\\t([A-Z_]+)\\s+(always|if idempotent)\\s+(fast|slow|none)\\b");
        for (String line : Files.readAllLines(repo().resolve("retry/doc.go"))) {
            Matcher m = row.matcher(line);
            if (m.find()) {
                table.put(m.group(1), new String[] {m.group(2), m.group(3)});
            }
        }
        assertTrue(table.size() >= 9, "could not read the class table from retry/doc.go: " + table.keySet());
        for (RetryClass c : RetryClass.values()) {
            String[] r = table.get(c.name());
            if (r == null) {
                assertFalse(c.retryable(true), c + " is not in the Go table, so it is never retried");
                assertEquals(RetryClass.Tier.NONE, c.tier(), c + ": never retried, no tier");
                continue;
            }
            assertTrue(c.retryable(true), c.name());
            assertEquals(r[0].equals("always"), c.retryable(false), c + " retried " + r[0]);
            RetryClass.Tier want = switch (r[1]) {
                case "fast" -> RetryClass.Tier.FAST;
                case "slow" -> RetryClass.Tier.SLOW;
                default -> RetryClass.Tier.ZERO;
            };
            assertEquals(want, c.tier(), c + " backoff " + r[1]);
        }
        for (String name : table.keySet()) {
            RetryClass.valueOf(name); // every class of the table exists here
        }
    }
}
