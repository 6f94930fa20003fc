package io.ticketing

import java.lang.module.ModuleFinder
import java.nio.file.Files
import java.nio.file.Path
import java.util.jar.Attributes
import java.util.jar.JarEntry
import java.util.jar.JarOutputStream
import java.util.jar.Manifest
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test

/**
 * The Kotlin module and the client together on the module path: the Kotlin
 * module's classes, jarred under its Automatic-Module-Name as the build
 * jars them, resolve beside the client's named module, Kotlin's standard
 * library and kotlinx-coroutines. A package of the client in the Kotlin
 * jar (a split package) fails the resolution.
 */
class ModulePathTest {
    private fun location(c: Class<*>): Path = Path.of(c.protectionDomain.codeSource.location.toURI())

    /** The Kotlin module's compiled classes as a jar with the build's manifest name. */
    private fun kotlinJar(name: String, dir: Path): Path {
        val classes = location(Class.forName("io.ticketing.kotlin.CoordinationCoroutines"))
        val jar = dir.resolve("ticketing-kotlin.jar")
        val manifest = Manifest()
        manifest.mainAttributes[Attributes.Name.MANIFEST_VERSION] = "1.0"
        manifest.mainAttributes[Attributes.Name("Automatic-Module-Name")] = name
        JarOutputStream(Files.newOutputStream(jar), manifest).use { out ->
            Files.walk(classes).use { files ->
                files.filter { Files.isRegularFile(it) }.sorted().forEach { f ->
                    out.putNextEntry(JarEntry(classes.relativize(f).toString().replace('\\', '/')))
                    Files.copy(f, out)
                    out.closeEntry()
                }
            }
        }
        return jar
    }

    @Test
    fun theClientAndTheKotlinModuleResolveTogether() {
        val name = System.getProperty("ticketing.kotlin.module") ?: "io.ticketing.kotlin"
        val dir = Files.createTempDirectory("ticketing-module-path")
        try {
            val finder = ModuleFinder.of(
                kotlinJar(name, dir),
                location(TicketBroker::class.java),
                location(KotlinVersion::class.java),
                location(kotlinx.coroutines.Job::class.java),
            )
            val roots = setOf(name, "io.ticketing.client", "kotlin.stdlib", "kotlinx.coroutines.core")
            // Throws ResolutionException when two modules hold one package.
            val cf = ModuleLayer.boot().configuration().resolve(finder, ModuleFinder.of(), roots)
            val layer = ModuleLayer.boot().defineModulesWithOneLoader(cf, ClassLoader.getPlatformClassLoader())
            val loader = layer.findLoader(name)
            assertEquals(name, loader.loadClass("io.ticketing.kotlin.CoordinationCoroutines").module.name)
            assertEquals(name, loader.loadClass("io.ticketing.kotlin.TicketingCoroutines").module.name)
            assertEquals("io.ticketing.client", loader.loadClass("io.ticketing.TicketBroker").module.name)
            assertEquals(
                setOf("io.ticketing.kotlin"),
                layer.findModule(name).get().packages,
                "the Kotlin module holds its own package only",
            )
        } finally {
            dir.toFile().deleteRecursively()
        }
    }
}
