package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The client's module descriptor: its JPMS name, and only the API packages
 * exported (tickets and coordination); the wire codec and the bridge
 * between the two stay inside.
 */
class ModuleTest {
    @Test
    void onlyTheApiPackageIsExported() throws Exception {
        ModuleDescriptor d;
        // the client's own classes directory (the class path also has the JDK's module-info files)
        java.nio.file.Path classes = java.nio.file.Path.of(TicketBroker.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        try (InputStream in = java.nio.file.Files.newInputStream(classes.resolve("module-info.class"))) {
            d = ModuleDescriptor.read(in);
        }
        assertEquals("io.ticketing.client", d.name());
        assertEquals(Set.of("io.ticketing", "io.ticketing.coordination"), d.exports().stream().map(ModuleDescriptor.Exports::source).collect(Collectors.toSet()));
        org.junit.jupiter.api.Assertions.assertTrue(java.nio.file.Files.isDirectory(classes.resolve("io/ticketing/wire")),
                "the module holds the wire package, unexported");
        org.junit.jupiter.api.Assertions.assertTrue(java.nio.file.Files.isDirectory(classes.resolve("io/ticketing/internal")),
                "the module holds the bridge package, unexported");
    }
}
