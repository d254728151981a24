// The daemon's own definitions of what the interface carries, re-exported one declaration at a time: an app that
// imports only this library sees each with its members (MemberImportVisibility asks for an import of the module
// that declares a member), and nothing else of the daemon's modules.
@_exported public import struct CoalesceCore.AlertButton
@_exported public import struct CoalesceCore.AlertContent
@_exported public import enum CoalesceCore.AlertStyle
@_exported public import enum CoalesceCore.AppState
@_exported public import enum CoalesceCore.CoalescingPolicy
@_exported public import enum CoalesceCore.LatePolicy
@_exported public import enum CoalesceCore.LaunchDestination
@_exported public import enum CoalesceCore.LaunchReason
@_exported public import enum CoalesceCore.LaunchRestoration
@_exported public import struct CoalesceCore.OpenedURL
@_exported public import enum CoalesceCore.RefreshCondition
@_exported public import enum CoalesceCore.RefreshLatePolicy
@_exported public import struct CoalesceCore.PolicyTextError
@_exported public import enum CoalesceCore.SuspensionMode
@_exported public import struct CoalesceWire.KindDeclaration
@_exported public import struct CoalesceWire.LaunchOptions
@_exported public import struct CoalesceWire.Posters

// The aliases give each type its page in this library's documentation, which shows only its own symbols.

/// An app's state, as the daemon reports it (``CoalescedApp/state``): `notRunning`, `inactive`, `active`,
/// `background` or `suspended`, in which it runs no code and what is posted to it is held, folded by each kind's
/// policy.
public typealias AppState = CoalesceCore.AppState

/// Where a launch put the app (`LaunchOptions.destination`): `foreground` when the user or an operator opened
/// it, `background` when a post of a kind mapped to a background mode, or a background launch, woke it.
public typealias LaunchDestination = CoalesceCore.LaunchDestination

/// Why the app was launched (`LaunchOptions.reason`): `user` (its process started on its own, or an operator's
/// Launch), `event(kind:)`, `notification(id:action:)` (its user answered one), or `url(_:)` (a URL was opened with
/// it).
public typealias LaunchReason = CoalesceCore.LaunchReason

/// How much of its saved state the app should bring back (`LaunchOptions.restoration`), as GTK's restore reasons
/// say: `pristine`, `launch`, `recover` (it crashed last time) or `restore` (the system ended it).
public typealias LaunchRestoration = CoalesceCore.LaunchRestoration

/// A URL opened with the app (``Delivery/openURL(_:)``, and `LaunchReason.url(_:)`): the URL, the uid that opened it,
/// and the MIME type it was opened as, if named.
public typealias OpenedURL = CoalesceCore.OpenedURL

/// A condition a background refresh may wait for (``CoalescedApp/scheduleRefresh(_:after:every:flex:requires:budget:late:keep:)``):
/// `acPower`, `notOnBattery`, `network` or `idle`.
public typealias RefreshCondition = CoalesceCore.RefreshCondition

/// What becomes of a refresh's runs missed while the daemon was down or the machine slept: `runOnce` (they come to
/// one) or `skip` (a run whose window passed is skipped).
public typealias RefreshLatePolicy = CoalesceCore.RefreshLatePolicy

/// How the posts of one kind are folded while the app is suspended: `latest` (the default), `first`, `count`,
/// `sum(field:)`, `merge`, `netChange` or `queue(bound:)`. `init(parsing:)` reads the form command lines write
/// (`sum:unread`, `queue:10`), which `description` gives back.
public typealias CoalescingPolicy = CoalesceCore.CoalescingPolicy

/// Text that is not a policy, for `CoalescingPolicy(parsing:)`: the `text` given and the `reason`, which says what
/// a policy looks like.
public typealias PolicyTextError = CoalesceCore.PolicyTextError

/// What willFinishLaunching and didFinishLaunching hand the app: its `destination`, the `reason` it was launched for,
/// its `restoration` (how much of what it saved to bring back) and its `restoredState`, what it last kept with
/// ``CoalescedApp/saveState(_:)``.
public typealias LaunchOptions = CoalesceWire.LaunchOptions

/// What an app declares about one kind of event (``AppDeclaration/kinds``): its ``CoalescingPolicy``, whether its
/// posts are `volatile` (held in memory only, answered without waiting for the disk, lost if the daemon stops),
/// and the `backgroundMode` a post of it launches the app into when it is not running.
public typealias KindDeclaration = CoalesceWire.KindDeclaration

/// Who may post to an app besides its own user and root (``AppDeclaration/posters``): `anyone` who can connect to
/// the daemon, these `uids`, and the members of these `groups`, by name.
public typealias Posters = CoalesceWire.Posters

/// How a presentation shows: as a `banner` (the default), without interrupting the app on screen, or as an
/// `alert` over the active app, which gets willResignActive until it is answered, then didBecomeActive.
public typealias NotificationStyle = CoalesceCore.AlertStyle

/// What becomes of fires missed while the machine slept, the daemon was down or the clock was set past them:
/// `deliver` presents each, marked late; `coalesce` (the default) presents one per app and thread, with the count;
/// `dropAfter(_:)` drops those later than the grace period and presents the others late.
public typealias LatePolicy = CoalesceCore.LatePolicy

/// A button a presentation offers: its `id` is the response's action (not `default` or `dismiss`), its `title`
/// the label; answering with a `foreground` one brings the app to the foreground (launching it there when it is
/// not running), any other launches it into the background.
public typealias NotificationAction = CoalesceCore.AlertButton

/// What a notification shows: a `title`, a `subtitle` and a `body` (empty: none), a `sound`'s name (`nil`:
/// silent), the app's `badge` once presented (0 clears it; `nil` leaves it), a `threadID` (notifications of one
/// thread are grouped on the desktop, and missed ones coalesced together), a `categoryID`, at most 8 `actions`, and
/// the user info handed back with each response (`userInfoJSON`, `setUserInfo(_:)`, `decodeUserInfo(_:)`).
public typealias NotificationContent = CoalesceCore.AlertContent
