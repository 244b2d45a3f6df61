"""What the simulated support assistant knows about: intents, topics, and their words.

Each topic has facts (sentences with numeric slots filled per tenant and
product, so tenants' documents differ) and query templates. Topics use
distinct vocabulary so that a real sentence encoder places them apart; the
off-topic pool is everyday chit-chat a product-support bot should not see,
which is what the topic-shift incident injects.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    intent: str
    name: str
    title: str
    facts: tuple[str, ...]  # slots: {product}, {n1}, {n2}, {n3}
    queries: tuple[str, ...]  # slots: {product}


def _t(intent: str, name: str, title: str, facts: tuple[str, ...], queries: tuple[str, ...]) -> Topic:
    return Topic(intent, name, title, facts, queries)


TOPICS: tuple[Topic, ...] = (
    _t(
        "billing",
        "invoice",
        "Invoices",
        (
            "Invoices for {product} are issued on day {n1} of each month and sent to the billing contact.",
            "You can download past invoices as PDF from Settings > Billing for the last {n2} months.",
            "A corrected invoice can be requested within {n3} days of the issue date.",
        ),
        (
            "Where can I download my {product} invoices?",
            "When is the monthly invoice for {product} issued?",
            "How do I get a corrected invoice for {product}?",
        ),
    ),
    _t(
        "billing",
        "refund",
        "Refunds",
        (
            "Annual {product} subscriptions can be refunded within {n1} days of purchase.",
            "Refunds are returned to the original payment method in {n2} business days.",
            "Partial months are not refunded, except after a service outage longer than {n3} hours.",
        ),
        (
            "Can I get a refund for my {product} subscription?",
            "How long does a {product} refund take to arrive?",
            "Is a partial month of {product} refundable?",
        ),
    ),
    _t(
        "billing",
        "payment_method",
        "Payment methods",
        (
            "{product} accepts credit cards, SEPA debit and bank transfer for invoices above {n1} USD.",
            "A failed card payment is retried {n2} times before the account is suspended.",
            "Changing the payment method takes effect on the next billing cycle, about {n3} days later.",
        ),
        (
            "How do I change the credit card used for {product}?",
            "What happens when my card payment for {product} fails?",
            "Does {product} accept bank transfer?",
        ),
    ),
    _t(
        "billing",
        "pricing_plan",
        "Plans and pricing",
        (
            "The {product} Team plan costs {n1} USD per seat per month, billed annually.",
            "Upgrading mid-cycle is prorated; downgrades apply at renewal.",
            "Volume discounts start at {n2} seats and reach {n3} percent for large teams.",
        ),
        (
            "How much does the {product} Team plan cost per seat?",
            "Is an upgrade of my {product} plan prorated?",
            "Are there volume discounts on {product} seats?",
        ),
    ),
    _t(
        "troubleshooting",
        "login_error",
        "Login errors",
        (
            "Error code {n1} on the {product} sign-in page means the session cookie expired.",
            "Clearing the browser cache and signing in again fixes most login loops.",
            "After {n2} failed attempts the account is locked for {n3} minutes.",
        ),
        (
            "I keep getting a login error in {product}, what should I do?",
            "Why is my {product} account locked after failed sign-ins?",
            "{product} sign-in page loops back, how to fix it?",
        ),
    ),
    _t(
        "troubleshooting",
        "sync_failure",
        "Sync failures",
        (
            "{product} synchronises data every {n1} minutes; a red banner means the last sync failed.",
            "Sync failures are usually caused by an expired connector token; reconnect the source.",
            "Records larger than {n2} MB are skipped and listed in the sync log for {n3} days.",
        ),
        (
            "My {product} data stopped syncing, how do I fix it?",
            "Why does {product} show a red sync banner?",
            "Which records does {product} skip during sync?",
        ),
    ),
    _t(
        "troubleshooting",
        "slow_dashboard",
        "Slow dashboards",
        (
            "{product} dashboards with more than {n1} widgets load slowly on the first visit.",
            "Enable cached queries to keep dashboard load time under {n2} seconds.",
            "Date ranges longer than {n3} months are computed in the background.",
        ),
        (
            "Why is my {product} dashboard so slow to load?",
            "How can I speed up dashboards in {product}?",
            "{product} dashboard takes forever with a long date range",
        ),
    ),
    _t(
        "troubleshooting",
        "api_timeout",
        "API timeouts",
        (
            "The {product} API times out requests that run longer than {n1} seconds.",
            "Use pagination with at most {n2} items per page to avoid timeouts.",
            "Rate-limited clients receive status 429 and should wait {n3} seconds before retrying.",
        ),
        (
            "Why do my {product} API calls time out?",
            "What page size should I use with the {product} API?",
            "What does a 429 from the {product} API mean?",
        ),
    ),
    _t(
        "product_info",
        "export_feature",
        "Exporting data",
        (
            "{product} exports reports as CSV or XLSX with up to {n1} thousand rows.",
            "Scheduled exports can be emailed daily or weekly to up to {n2} recipients.",
            "Exports are kept for download for {n3} days.",
        ),
        (
            "How do I export a report from {product} to CSV?",
            "Can {product} email scheduled exports?",
            "How many rows can a {product} export contain?",
        ),
    ),
    _t(
        "product_info",
        "integrations",
        "Integrations",
        (
            "{product} integrates with Slack, Salesforce and {n1} other tools from the marketplace.",
            "Webhooks deliver events within {n2} seconds and retry for {n3} hours.",
            "Each workspace can install integrations only with admin approval.",
        ),
        (
            "Does {product} integrate with Salesforce?",
            "How do webhooks work in {product}?",
            "Who can install integrations in {product}?",
        ),
    ),
    _t(
        "product_info",
        "mobile_app",
        "Mobile app",
        (
            "The {product} mobile app runs on iOS {n1} and Android {n2} or newer.",
            "Offline mode keeps the last {n3} days of data on the device.",
            "Push notifications can be muted per project from the app settings.",
        ),
        (
            "Is there a {product} app for Android?",
            "Does the {product} mobile app work offline?",
            "How do I mute notifications in the {product} app?",
        ),
    ),
    _t(
        "product_info",
        "reporting",
        "Reports",
        (
            "{product} ships {n1} built-in report templates for revenue, usage and churn.",
            "Custom reports can combine up to {n2} data sources.",
            "Report data refreshes every {n3} hours on standard plans.",
        ),
        (
            "What reports are built into {product}?",
            "Can I build a custom report in {product}?",
            "How often does {product} refresh report data?",
        ),
    ),
    _t(
        "account",
        "password_reset",
        "Password reset",
        (
            "A {product} password reset link is valid for {n1} minutes.",
            "Passwords need at least {n2} characters and cannot repeat the last {n3} passwords.",
            "Single sign-on users reset their password with their identity provider.",
        ),
        (
            "How do I reset my {product} password?",
            "My {product} password reset link expired",
            "What are the {product} password rules?",
        ),
    ),
    _t(
        "account",
        "two_factor",
        "Two-factor authentication",
        (
            "{product} supports authenticator apps and hardware keys for two-factor authentication.",
            "Each user receives {n1} backup codes when enabling two-factor authentication.",
            "Admins can require two-factor authentication for all members after a {n2}-day grace period.",
        ),
        (
            "How do I turn on two-factor authentication in {product}?",
            "I lost my phone, how do I use {product} backup codes?",
            "Can an admin enforce 2FA in {product}?",
        ),
    ),
    _t(
        "account",
        "user_roles",
        "Roles and permissions",
        (
            "{product} has Owner, Admin, Editor and Viewer roles.",
            "A workspace can have at most {n1} owners and unlimited viewers.",
            "Role changes are recorded in the audit log for {n2} days.",
        ),
        (
            "What roles exist in {product}?",
            "How do I make someone an admin in {product}?",
            "Where can I see who changed roles in {product}?",
        ),
    ),
    _t(
        "account",
        "delete_account",
        "Deleting an account",
        (
            "Deleting a {product} account removes all data after a {n1}-day recovery window.",
            "Only the workspace owner can delete the account.",
            "Export your data first: deleted data cannot be restored after {n2} days.",
        ),
        (
            "How do I delete my {product} account?",
            "Can I recover a deleted {product} account?",
            "Who is allowed to delete a {product} workspace?",
        ),
    ),
    _t(
        "policy",
        "data_retention",
        "Data retention",
        (
            "{product} keeps raw event data for {n1} months and aggregates for {n2} years.",
            "Customers on enterprise plans can shorten retention to {n3} days.",
            "Backups are deleted on the same schedule as the primary data.",
        ),
        (
            "How long does {product} keep my data?",
            "Can I shorten data retention in {product}?",
            "Are {product} backups deleted too?",
        ),
    ),
    _t(
        "policy",
        "privacy",
        "Privacy and GDPR",
        (
            "{product} processes personal data under a data processing agreement available on request.",
            "Data subject requests are answered within {n1} days.",
            "Sub-processors are listed publicly and changes are announced {n2} days in advance.",
        ),
        (
            "Is {product} GDPR compliant?",
            "How do I file a data subject request with {product}?",
            "Where is the list of {product} sub-processors?",
        ),
    ),
    _t(
        "policy",
        "sla",
        "Service level agreement",
        (
            "{product} guarantees {n1}.9 percent monthly uptime on business plans.",
            "Service credits of {n2} percent apply when uptime falls below the guarantee.",
            "Credits must be claimed within {n3} days of the incident.",
        ),
        (
            "What uptime does {product} guarantee?",
            "How do I claim an SLA credit for {product}?",
            "What compensation does {product} give for downtime?",
        ),
    ),
    _t(
        "policy",
        "acceptable_use",
        "Acceptable use",
        (
            "{product} forbids automated scraping faster than {n1} requests per second.",
            "Accounts that send spam are suspended after {n2} warnings.",
            "Security research is welcome under the disclosure policy with {n3} days of notice.",
        ),
        (
            "What is not allowed under the {product} acceptable use policy?",
            "Can my {product} account be suspended for spam?",
            "Can I do security testing on {product}?",
        ),
    ),
)

INTENTS: tuple[str, ...] = ("billing", "troubleshooting", "product_info", "account", "policy")
TOPICS_BY_INTENT: dict[str, tuple[Topic, ...]] = {
    intent: tuple(t for t in TOPICS if t.intent == intent) for intent in INTENTS
}
# Intents whose documents go stale: the app adds an updated_at recency predicate for them.
RECENCY_INTENTS: frozenset[str] = frozenset({"troubleshooting", "product_info"})
OFF_TOPIC_INTENT = "other"

PRODUCTS: tuple[str, ...] = ("ledger", "insights", "fieldapp", "connect", "vault", "pulse")
LOCALES: tuple[str, ...] = ("en", "pt", "pl")

QUERY_OPENERS: tuple[str, ...] = ("", "", "", "Hi, ", "Quick question: ", "Hello! ", "Please help: ")
QUERY_CLOSERS: tuple[str, ...] = ("", "", "", " Thanks.", " Thank you!", " Urgent.")

OFF_TOPIC_QUERIES: tuple[str, ...] = (
    "What is a good recipe for {dish} tonight?",
    "How long should I cook {dish}?",
    "Which wine goes well with {dish}?",
    "What is the weather going to be like in {city} this weekend?",
    "What are the best things to see in {city}?",
    "Cheapest way to fly to {city} in summer?",
    "Who won the {sport} match last night?",
    "How do I get better at {sport}?",
    "Recommend a movie like {movie}.",
    "Is {movie} worth watching?",
    "How often should I water my {plant}?",
    "Why are the leaves of my {plant} turning yellow?",
)
OFF_TOPIC_SLOTS: dict[str, tuple[str, ...]] = {
    "dish": ("lasagna", "paella", "pierogi", "feijoada", "ramen", "risotto"),
    "city": ("Lisbon", "Krakow", "Tokyo", "Lima", "Oslo", "Nairobi"),
    "sport": ("tennis", "football", "chess", "volleyball", "basketball"),
    "movie": ("Inception", "Amelie", "Spirited Away", "The Matrix", "Casablanca"),
    "plant": ("monstera", "basil", "orchid", "cactus", "fern"),
}

# Confident claims no document supports: what an answer sounds like when it
# stops using its context (the unfaithful_answers incident).
UNSUPPORTED_CLAIMS: tuple[str, ...] = (
    "{product} gives every customer a lifetime discount of {n1} percent after the first year.",
    "You can call the {product} hotline around the clock and an engineer will fix it remotely in {n2} minutes.",
    "This was fixed automatically in version {n1}.{n2}, so no action is needed on your side.",
    "{product} stores an unlimited history forever at no extra cost.",
    "All {product} plans include a free dedicated account manager and on-site training.",
    "Simply uninstall {product} and reinstall it twice; this resets every setting and restores lost data.",
)

REFUSALS: tuple[str, ...] = (
    "I'm sorry, I could not find that in the documentation.",
    "I don't have enough information in the knowledge base to answer that.",
    "I can't help with that question; please contact support.",
)

ANSWER_LEADS: tuple[str, ...] = (
    "",
    "According to the documentation, ",
    "Here is what I found: ",
    "Good question. ",
)
