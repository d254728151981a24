// swift-tools-version:6.1
import PackageDescription

// Hummingbird's upcoming features: no implicit existentials, imports that are visible only where written,
// and internal imports unless a module's types are part of our public API.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "coalesced",
    products: [
        .executable(name: "coalesced", targets: ["CoalesceDaemon"]),
        .executable(name: "coalescectl", targets: ["CoalesceCtl"]),
        .executable(name: "coalesce-notify-agent", targets: ["CoalesceNotifyAgent"]),
        .executable(name: "coalesce-screen-agent", targets: ["CoalesceScreenAgent"]),
        .executable(name: "coalesced-bench", targets: ["CoalesceBench"]),
        .executable(name: "coalesce-example", targets: ["CoalesceExample"]),
        .executable(name: "notes-example", targets: ["NotesExample"]),
        .library(name: "Varlink", targets: ["Varlink"]),
        .library(name: "CoalesceClient", targets: ["CoalesceClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        // `swift package generate-documentation`: the client library's DocC documentation (scripts/test builds it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // xcb, for coalesce-screen-agent's X11 windows alone: only X11Session imports it, and only the agent links that.
        .systemLibrary(
            name: "CXcb",
            pkgConfig: "xcb-ewmh",
            providers: [.apt(["libxcb-ewmh-dev", "libxcb-res0-dev"])]
        ),
        .systemLibrary(
            name: "CPCRE2",
            pkgConfig: "libpcre2-8",
            providers: [.apt(["libpcre2-dev"])]
        ),
        .target(
            name: "Systemd",
            dependencies: [
                "CSystemd",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "X11Session",
            dependencies: ["CXcb"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoalesceCore",
            dependencies: [
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Varlink",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoalesceWire",
            dependencies: ["CoalesceCore", "Varlink"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoalesceStore",
            dependencies: ["CoalesceCore", "Systemd", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "VarlinkEmbed",
            swiftSettings: swiftSettings
        ),
        .plugin(
            name: "VarlinkInterfaces",
            capability: .buildTool(),
            dependencies: ["VarlinkEmbed"]
        ),
        .target(
            name: "CoalesceServer",
            dependencies: [
                "CoalesceCore",
                "CoalesceStore",
                "CoalesceWire",
                "Varlink",
                "Systemd",
                "CPCRE2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            exclude: ["Interfaces"],
            swiftSettings: swiftSettings,
            plugins: ["VarlinkInterfaces"]
        ),
        .executableTarget(
            name: "CoalesceDaemon",
            dependencies: [
                "CoalesceServer",
                "CoalesceWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CoalesceCtl",
            dependencies: [
                "Varlink",
                "CoalesceCore",
                "CoalesceWire",
                "Systemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CoalesceNotifyAgent",
            dependencies: [
                "Varlink",
                "CoalesceCore",
                "CoalesceWire",
                "Systemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CoalesceScreenAgent",
            dependencies: [
                "Varlink",
                "CoalesceCore",
                "CoalesceWire",
                "Systemd",
                "X11Session",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoalesceClient",
            dependencies: [
                "CoalesceCore",
                "CoalesceWire",
                "Varlink",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The examples use the CoalesceClient product and nothing else of ours, as an app outside this package would.
        .executableTarget(
            name: "CoalesceExample",
            dependencies: [
                "CoalesceClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/CoalesceExample",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "NotesExample",
            dependencies: ["CoalesceClient"],
            path: "Examples/Notes",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "CoalesceBench",
            dependencies: [
                "Varlink",
                "Systemd",
                "CoalesceTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/CoalesceBench",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CoalesceTestSupport",
            dependencies: ["Varlink"],
            path: "Tests/CoalesceTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoalesceCoreTests",
            dependencies: ["CoalesceCore", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoalesceWireTests",
            dependencies: ["CoalesceWire", "CoalesceCore", "Varlink"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "VarlinkTests",
            dependencies: [
                "Varlink",
                "CoalesceTestSupport",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CoalesceServerTests",
            dependencies: [
                "CoalesceServer",
                "CoalesceCore",
                "CoalesceStore",
                "Systemd",
                "CoalesceTestSupport",
                "Varlink",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProcessTests",
            dependencies: [
                "CoalesceTestSupport", "CoalesceServer", "Varlink", "CoalesceDaemon", "CoalesceCtl", "CoalesceExample",
                "NotesExample", "CoalesceClient", "CoalesceNotifyAgent", "CoalesceScreenAgent", "CoalesceWire", "Systemd",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SandboxTests",
            dependencies: [
                "CoalesceTestSupport",
                "Varlink",
                "Systemd",
                "CoalesceDaemon",
                "CoalesceCtl",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// The ThreadSanitizer build (scripts/tsan) gives our modules a `Mutex` that ThreadSanitizer sees
// (Sources/Varlink/ThreadSanitizerMutex.swift); dependencies are built as always.
if Context.environment["COALESCED_TSAN"] == "1" {
    for target in package.targets where target.type != .system && target.type != .plugin {
        target.swiftSettings = (target.swiftSettings ?? []) + [.define("COALESCED_TSAN")]
    }
}

// Fuzz targets (Fuzz/, docs/architecture.md#fuzzing): libFuzzer supplies their main, so they link only in a build
// with `--sanitize=fuzzer`. They are declared only when scripts/fuzz asks for them, and a plain `swift build` never
// sees them.
if Context.environment["COALESCED_FUZZ"] == "1" {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzVarlink", ["Varlink", .product(name: "NIOCore", package: "swift-nio")]),
        ("FuzzParameters", ["CoalesceServer", "CoalesceWire", "CoalesceCore", "Varlink"]),
        ("FuzzConfiguration", ["CoalesceServer"]),
        ("FuzzCore", ["CoalesceCore"]),
        ("FuzzNotifications", ["CoalesceServer", "CoalesceCore", "Varlink"]),
        ("FuzzWatches", ["CoalesceServer", "CoalesceCore", "Varlink"]),
    ]
    // libFuzzer's main is linked into every executable of such a build, the interface files' build tool too.
    for target in package.targets where target.name == "VarlinkEmbed" {
        target.swiftSettings = (target.swiftSettings ?? []) + [.define("COALESCED_FUZZ_BUILD")]
    }
    for target in fuzzTargets {
        package.targets.append(
            .executableTarget(
                name: target.name,
                dependencies: target.dependencies,
                path: "Fuzz/\(target.name)",
                // No main of its own: `--sanitize=fuzzer` compiles it as a library, and libFuzzer's main calls its
                // LLVMFuzzerTestOneInput.
                swiftSettings: swiftSettings
            )
        )
        package.products.append(.executable(name: target.name, targets: [target.name]))
    }
}
