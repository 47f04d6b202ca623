/**
 * Usage texts, kept apart from the commands so that --help and --version
 * answer without loading Arrow or the codecs.
 * Every line fits in 80 columns.
 */

export const USAGE = `Usage: columnar-shuffle <command> [options]

A Gluten-style columnar shuffle for Apache Arrow data: split a map task's
Arrow input into partitions (one data file, an index and CRC32C checksums).

Commands:
  write <input> --partitions N --output PREFIX [--key COL,...]
        [--writer hash|sort|auto]
                   shuffle an Arrow IPC file or stream into PREFIX.data,
                   PREFIX.index and PREFIX.checksum.CRC32C
  read <prefix> --partition P [--output FILE]
                   one partition as an uncompressed Arrow IPC stream
  inspect <prefix> [--json]
                   schema, codec, and bytes, batches and rows per partition
  demo [--rows N] [--partitions N] [--dir DIR]
                   generate, shuffle, read back and verify demo data
  clean [--output PREFIX] [--dir DIR] [--spill-dir DIR]
                   remove the temporary and spill files of a killed write
  help [command]   show help for a command

Options:
  -h, --help       show this help; 'columnar-shuffle <command> --help' shows
                   a command's options
  -V, --version    print the version

Errors are one line on stderr, 'columnar-shuffle: error CS_<CODE>: <message>',
with a stable code. Exit status: 0 success, 1 the operation failed,
2 a usage error (unknown option, missing or bad value), 130 interrupted.
SIGINT, SIGTERM or SIGHUP stops a command and removes the files it made (not
once its output is being committed: it then stands); a second signal exits at
once and may leave temporary files: see 'clean'.
`;

export const WRITE_HELP = `Usage: columnar-shuffle write <input> --partitions N --output PREFIX [options]

Shuffles an Arrow IPC file (.arrow, .feather) or stream (.arrows) into
PREFIX.data, PREFIX.index and PREFIX.checksum.CRC32C. The input format is told
from the file's bytes, not its name; compressed (LZ4, ZSTD) inputs are fine.

Options:
  -p, --partitions N       number of output partitions, >= 1
  -o, --output PREFIX      output path prefix, in an existing directory
  -k, --key COL[,COL...]   key columns of hash partitioning (Spark's Murmur3)
                           or of range partitioning, there each COL[:desc]
                           [:nulls-first|:nulls-last] (default: ascending,
                           nulls first; descending, nulls last)
      --partitioning KIND  hash | range | round-robin | single
                           (default: hash with --key; otherwise required)
      --bounds FILE        range partitioning's split points: an Arrow file
                           or stream with a column per key (its type), one
                           row per bound, strictly ascending in the keys'
                           order, at most N - 1 rows; a row goes to the
                           partition numbered by how many bounds sort
                           before it (Spark's RangePartitioner)
  -c, --codec CODEC        body compression: lz4 | zstd | none (default: lz4)
      --dictionary-updates delta|replacement
                           how a dictionary that grows reaches each partition:
                           delta batches (default) or whole replacements (the
                           only kind polars reads)
  -w, --writer KIND        hash: the columnar writer, partitions are Arrow
                           IPC streams (default); sort: the sort-based row
                           writer (compact rows radix-sorted by partition;
                           pays off at thousands of partitions); auto: sort
                           from 4000 partitions, or when the memory limit
                           leaves the columnar writer's partition buffers
                           under 32 rows, else hash. 'read' reads either
      --map-id N           map task id, seeds round-robin's start (default: 0)
      --memory-limit SIZE  most memory the writer may hold; beyond it, it
                           spills to disk (default: half the memory of the
                           machine, or of its container). SIZE is bytes
                           or a number with a unit: KiB, MiB, GiB are powers
                           of 1024, KB, MB, GB powers of 1000 (64MiB, 1.5GiB)
      --spill-dir DIR      existing directory for the spill files, which are
                           deleted when done (default: the OS temp directory)
      --overwrite          replace an existing output at PREFIX (without it,
                           an existing output is error CS_OUTPUT_EXISTS)
      --json               print one JSON object with the result on stdout,
                           writer, spills, spilledBytes and peakMemoryBytes
                           included
  -h, --help               show this help
`;

export const READ_HELP = `Usage: columnar-shuffle read <prefix> --partition P [--output FILE]

Writes partition P of the shuffle output PREFIX.data / .index / .checksum.CRC32C
as an uncompressed Arrow IPC stream, to FILE or to stdout, whichever writer
made it (hash: Arrow IPC partitions, sort: row partitions; told from the bytes).
The partition's checksum is verified first. An empty partition gives a stream
with the schema and no batches (with no columns either for an output without
rows written before 2026-12-07, which stores no schema).

Options:
  -P, --partition P   the partition to read, 0 <= P < partitions (required)
  -o, --output FILE   write the stream to FILE (default: stdout, which must
                      not be a terminal)
  -h, --help          show this help
`;

export const INSPECT_HELP = `Usage: columnar-shuffle inspect <prefix> [--json]

Describes the shuffle output PREFIX.data / .index / .checksum.CRC32C: the
writer that made it, schema, codec, and bytes, record batches (row blocks for
the sort writer) and rows of every partition. Every partition's checksum is
verified on the way.

Options:
      --json      print one JSON object on stdout
  -h, --help      show this help
`;

export const DEMO_HELP = `Usage: columnar-shuffle demo [--rows N] [--partitions N] [--dir DIR] [--codec C]
                          [--writer hash|sort]

Generates demo data in memory (int64 key, float64, utf8 of ~20 bytes, int32
with 10 % nulls; batches of 8192 rows), shuffles it by hash of the key, reads
every partition back and verifies it: row counts, every row in the partition
its key hashes to, and a fingerprint of all values. Exits 1 if that fails.

Options:
  -n, --rows N         rows to generate (default: 1000000)
  -p, --partitions N   number of partitions (default: 200)
  -d, --dir DIR        write the output into DIR (created if needed) and keep
                       it (default: a temporary directory, removed afterwards)
  -c, --codec CODEC    lz4 | zstd | none (default: lz4)
  -w, --writer KIND    hash (columnar, default) | sort (row-based)
      --memory-limit SIZE
                       most memory the writer may hold, spilling beyond it
                       (default: no limit); SIZE as in 'write --help': 64MiB
  -h, --help           show this help
`;

export const CLEAN_HELP = `Usage: columnar-shuffle clean [--output PREFIX] [--dir DIR] [--spill-dir DIR]

Removes what a killed 'write' left behind. A write that fails or is stopped
removes its own files; one that is killed (SIGKILL, a crash, a second Ctrl-C)
cannot. Run it before writing again, and never while a write uses the same
prefix or directories: it would delete that write's files.

Options:
  -o, --output PREFIX  the temporary files of the output PREFIX
                       (PREFIX.data.<12 hex>.tmp ...), and its data and
                       checksum files when PREFIX.index does not exist (a
                       commit cut short: the index is written last)
  -d, --dir DIR        the temporary output files of every prefix in DIR
      --spill-dir DIR  the spill files in DIR
                       (columnar-shuffle-spill-<16 hex>.tmp)
      --json           print {"removed": [paths]} on stdout
  -h, --help           show this help

A committed output (PREFIX.index exists) is never removed, nor any file whose
name is not exactly one of those above.
`;
