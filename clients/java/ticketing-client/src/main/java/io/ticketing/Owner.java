package io.ticketing;

import java.util.Arrays;
import java.util.HexFormat;
import org.jspecify.annotations.Nullable;

/**
 * The 16-byte owner of an acquire, as a value: equal when the bytes are
 * equal, printed in hexadecimal. A free key's owner is all zeros.
 */
public final class Owner {
    private final byte[] bytes;

    private Owner(byte[] bytes) {
        this.bytes = bytes;
    }

    /**
     * The owner with these bytes (copied).
     *
     * @param bytes the owner's bytes, as on the wire
     * @return the owner
     */
    public static Owner of(byte[] bytes) {
        return new Owner(bytes.clone());
    }

    /**
     * The owner's bytes.
     *
     * @return a copy of the bytes
     */
    public byte[] toBytes() {
        return bytes.clone();
    }

    /**
     * Whether every byte is zero (the owner of a free key).
     *
     * @return true for the zero owner
     */
    public boolean isZero() {
        for (byte b : bytes) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean equals(@Nullable Object o) {
        return o instanceof Owner && Arrays.equals(bytes, ((Owner) o).bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    /** The bytes in lower-case hexadecimal. */
    @Override
    public String toString() {
        return HexFormat.of().formatHex(bytes);
    }
}
