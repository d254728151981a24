@testable import CoalesceServer
import CoalesceTestSupport
import Foundation
import Testing
import Varlink

/// What scripts/install puts on a machine: the man pages, the completions, the units naming them.
@Suite struct InstallTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static let pages = ["coalescectl.1", "coalesce-notify-agent.1", "coalesce-screen-agent.1", "coalesced.8", "coalesced.conf.5"]

    @Test(arguments: InstallTests.pages) func manPageRendersWithoutWarnings(page: String) async throws {
        let path = Self.repository + "/man/" + page
        let rendered = try await onThread {
            try runProcess("/usr/bin/env", ["MANWIDTH=80", "man", "--warnings", "-E", "UTF-8", "-l", path])
        }
        #expect(rendered.status == 0, "\(rendered.stderr)")
        #expect(rendered.stderr.isEmpty, "groff's warnings for \(page): \(rendered.stderr)")
        #expect(rendered.stdout.contains("NAME") && rendered.stdout.count > 1000, "\(rendered.stdout)")
    }

    /// coalesced.conf(5) is written by hand: it names every key the daemon reads, in its section.
    @Test func configurationPageNamesEveryKey() throws {
        let page = try String(contentsOfFile: Self.repository + "/man/coalesced.conf.5", encoding: .utf8)
        let sections = page.components(separatedBy: "\n.SH ")
        for (section, keys) in ConfigurationKey.all {
            let text = sections.first { $0.hasPrefix("[\(section.uppercased())] SECTION") }
            #expect(text != nil, "a section for [\(section)]")
            for key in keys.keys {
                #expect(text?.contains(".BI \(key)= ") == true, "[\(section)] \(key)= is described")
            }
        }
    }

    /// The pages generated from the argument parser (scripts/manpages) are those of the binaries as built: every
    /// subcommand and option the binary has is in its page.
    @Test(arguments: [
        ("coalescectl", "coalescectl.1"), ("coalesce-notify-agent", "coalesce-notify-agent.1"),
        ("coalesce-screen-agent", "coalesce-screen-agent.1"), ("coalesced", "coalesced.8"),
    ])
    func generatedManPageIsCurrent(binary: String, page: String) async throws {
        // The page as man renders it, on lines long enough not to be broken, its hyphens and minus signs as typed.
        let rendered = try await onThread {
            try runProcess("/usr/bin/env", ["MANWIDTH=1000", "man", "-E", "UTF-8", "-l", Self.repository + "/man/" + page])
        }
        #expect(rendered.status == 0, "\(rendered.stderr)")
        let text = rendered.stdout.replacingOccurrences(of: "\u{2010}", with: "-").replacingOccurrences(of: "\u{2212}", with: "-")
        let dump = try await onThread { try runProcess(BuildProducts.path(of: binary), ["--experimental-dump-help"]) }
        let tool = try JSONParser.parse(dump.stdout)
        func check(_ command: JSONValue, path: [String]) {
            for argument in command["arguments"]?.arrayValue ?? [] {
                guard argument["shouldDisplay"]?.boolValue != false else { continue }
                for name in argument["names"]?.arrayValue ?? [] where name["kind"] == "long" {
                    let long = "--" + (name["name"]?.stringValue ?? "")
                    #expect(text.contains(long), "\(page) shows \((path + [long]).joined(separator: " ")); run scripts/manpages")
                }
            }
            for subcommand in command["subcommands"]?.arrayValue ?? [] {
                let name = subcommand["commandName"]?.stringValue ?? "?"
                #expect(text.contains(name), "\(page) shows the subcommand \(name); run scripts/manpages")
                check(subcommand, path: path + [name])
            }
        }
        check(tool["command"] ?? .null, path: [binary])
    }

    @Test func installPutsEverythingUnderPrefixAndDestdir() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        let binaries = (BuildProducts.path(of: "coalescectl") as NSString).deletingLastPathComponent
        let run = try await onThread {
            try runProcess("/usr/bin/env", [
                "DESTDIR=\(root)", "PREFIX=/opt/coalesced", "BUILD_DIR=\(binaries)",
                Self.repository + "/scripts/install", "--no-build",
            ])
        }
        #expect(run.status == 0, "\(run.stderr)")
        for file in [
            "/opt/coalesced/bin/coalesced", "/opt/coalesced/bin/coalescectl", "/opt/coalesced/bin/coalesce-notify-agent",
            "/opt/coalesced/bin/coalesce-screen-agent", "/etc/systemd/user/coalesce-screen-agent.service",
            "/opt/coalesced/share/man/man1/coalesce-screen-agent.1",
            "/etc/systemd/system/coalesced.service", "/etc/systemd/system/coalesced.socket",
            "/etc/systemd/user/coalesced.service", "/etc/systemd/user/coalesced.socket",
            "/etc/systemd/user/coalesce-notify-agent.service",
            "/usr/lib/systemd/catalog/coalesced.catalog",
            "/opt/coalesced/share/bash-completion/completions/coalescectl",
            "/opt/coalesced/share/zsh/site-functions/_coalescectl",
            "/opt/coalesced/share/fish/vendor_completions.d/coalescectl.fish",
            "/opt/coalesced/share/bash-completion/completions/coalesced",
            "/opt/coalesced/share/man/man1/coalescectl.1", "/opt/coalesced/share/man/man1/coalesce-notify-agent.1",
            "/opt/coalesced/share/man/man8/coalesced.8",
            "/opt/coalesced/share/man/man5/coalesced.conf.5", "/opt/coalesced/share/doc/coalesced/README.md",
        ] {
            #expect(FileManager.default.fileExists(atPath: root + file), "\(file) installed")
        }
        let service = try String(contentsOfFile: root + "/etc/systemd/system/coalesced.service", encoding: .utf8)
        #expect(service.contains("\nExecStart=/opt/coalesced/bin/coalesced --system\n"))
        #expect(service.contains("\nDocumentation=man:coalesced(8) man:coalesced.conf(5) man:coalescectl(1)\n"))
        #expect(service.contains("\nDocumentation=file:///opt/coalesced/share/doc/coalesced/README.md\n"))
        let userService = try String(contentsOfFile: root + "/etc/systemd/user/coalesced.service", encoding: .utf8)
        #expect(userService.contains("\nExecStart=/opt/coalesced/bin/coalesced --user\n"))
        let agentService = try String(
            contentsOfFile: root + "/etc/systemd/user/coalesce-notify-agent.service", encoding: .utf8
        )
        #expect(agentService.contains("\nExecStart=/opt/coalesced/bin/coalesce-notify-agent\n"))
        #expect(agentService.contains("\nPartOf=graphical-session.target\n"))
        #expect(agentService.contains("\nWantedBy=graphical-session.target default.target\n"))
        // Every unit names the man pages; man finds each under the installed tree.
        for unit in [
            "system/coalesced.service", "system/coalesced.socket", "user/coalesced.service", "user/coalesced.socket",
            "user/coalesce-notify-agent.service", "user/coalesce-screen-agent.service",
        ] {
            let text = try String(contentsOfFile: root + "/etc/systemd/" + unit, encoding: .utf8)
            #expect(text.contains("Documentation=man:coalesced(8)"), "\(unit)")
        }
        let found = try await onThread {
            try runProcess("/usr/bin/env", ["MANPATH=\(root)/opt/coalesced/share/man", "man", "-w", "coalesced.conf"])
        }
        #expect(found.stdout == "\(root)/opt/coalesced/share/man/man5/coalesced.conf.5\n", "\(found.stderr)")
    }
}
