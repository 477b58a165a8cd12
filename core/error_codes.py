"""Every error code the platform answers with, defined once, with its message for users.

A code is a stable contract: the API returns it as `code`, scripts branch on it, and
tests assert it. Its label is what the user reads, in their language; placeholders are
filled from `DomainError.params` (or an `errors` entry's `params`). Three codes are
generic (`invalid`, `conflict`, `forbidden`): their text depends on the case, so the
service's own message is shown for them. Find a code's every use with grep.
"""
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext_lazy


class ErrorCode(models.TextChoices):
    # Generic: the service's message says what is wrong.
    INVALID = "invalid", _("The request is invalid.")
    CONFLICT = "conflict", _("The request conflicts with the current state.")
    FORBIDDEN = "forbidden", _("You may not do this.")
    NOT_FOUND = "not_found", _("Not found, or not yours.")
    # Input no view sees (core.input_guard).
    INPUT_CONTROL_CHARACTER = "input_control_character", _(
        "“%(field)s” contains a control character (%(character)s); remove it and send again. Nothing was saved.")
    INPUT_TOO_LARGE = "input_too_large", _("The request is too large: at most %(limit)s MB. Nothing was saved.")
    INPUT_NOT_OBJECT = "input_not_object", _("The request body must be a JSON object, such as {\"overlap\": 3}.")
    INPUT_TOO_DEEP = "input_too_deep", _(
        "The JSON body is nested too deeply: at most %(limit)s levels. Nothing was saved.")

    # Fields (entries of `errors`).
    REQUIRED = "required", _("This field is required.")
    TOO_LONG = "too_long", _("This value is too long.")
    MISSING = "missing", _("This item has no mark yet.")
    NOT_BINARY = "not_binary", _("Expected 0 or 1.")
    NOT_OBJECT = "not_object", _("Expected an object.")
    UNKNOWN_ITEM = "unknown_item", _("Not a rubric item of this task.")

    # Accounts and membership.
    INVALID_ROLE = "invalid_role", _("Unknown role %(role)s; expected one of: %(roles)s.")
    DUPLICATE_USERNAME = "duplicate_username", _("The username %(username)s is already taken.")
    INVALID_PASSWORD = "invalid_password", _("The password is not accepted: %(reasons)s")
    NOT_MEMBER = "not_member", _("You are not an annotator in this project.")
    NO_PROFILE = "no_profile", _("Your account has no expert profile yet; ask an administrator.")
    PAUSED = "paused", _("Your expert account is paused; contact the project manager.")
    NOTIFICATION_KIND_UNKNOWN = "notification_kind_unknown", _("There is no notification kind %(kind)s; "
                                                               "nothing was saved.")

    # The roster and invitations.
    USER_UNKNOWN = "user_unknown", _("No account has the username or email %(name)s.")
    MEMBER_UNKNOWN = "member_unknown", _("%(name)s is not a member of this project.")
    MEMBER_ADMIN = "member_admin", _("%(name)s is an administrator and reaches every project already; "
                                     "administrators are not added as members.")
    LAST_PM = "last_pm", _("You are the last project manager of this project. Add another project manager "
                           "first, or ask an administrator to remove you.")
    INVITATION_INVALID = "invitation_invalid", _(
        "This invitation link is not valid. Check that you copied the whole link, or ask your project "
        "manager for a new one.")
    INVITATION_EXPIRED = "invitation_expired", _(
        "This invitation link has expired. Ask your project manager for a new one.")
    INVITATION_REVOKED = "invitation_revoked", _(
        "This invitation link was withdrawn by the project manager. Ask them for a new one.")
    INVITATION_USED_UP = "invitation_used_up", _(
        "This invitation link has been used as many times as it allows. Ask your project manager for a new one.")
    INVITATION_FOR_EXPERTS = "invitation_for_experts", _(
        "This invitation is for experts, and you are signed in with another kind of account. Sign out "
        "and open the link again to create an expert account.")
    INVITATION_FOR_PMS = "invitation_for_pms", _(
        "This invitation is for project managers. Sign in with a project manager account (an administrator "
        "creates those) and open the link again.")
    INVITATION_EXPIRY = "invitation_expiry", _("An invitation is valid for 1 to %(max)s days.")
    INVITATION_MAX_USES = "invitation_max_uses", _("An invitation can be used 1 to %(max)s times.")
    INVALID_USERNAME = "invalid_username", _(
        "A username has at most 150 letters, digits and the characters @ . + - _ (no spaces).")
    INVALID_EMAIL = "invalid_email", _("Enter a valid email address.")
    DUPLICATE_EMAIL = "duplicate_email", _("An account with this email address already exists; sign in "
                                           "with it instead.")
    PASSWORD_MISMATCH = "password_mismatch", _("The two passwords are not the same.")
    TOO_MANY_SIGNUPS = "too_many_signups", _("Too many sign-up attempts from your network; try again in a "
                                             "few minutes.")
    WEEKLY_CAPACITY = "weekly_capacity", _("Weekly capacity is a whole number of tasks from %(low)s to %(high)s.")
    UNKNOWN_LANGUAGE = "unknown_language", _("Unknown language: %(value)s.")
    UNKNOWN_SPECIALTY = "unknown_specialty", _("Unknown specialty; choose from the list.")

    # Assignment by hand, priority and hand-over (a PM names the experts).
    ASSIGN_NOT_MEMBER = "assign_not_member", _("%(name)s is not an annotator in this project.")
    ASSIGN_PAUSED = "assign_paused", _("%(name)s is paused; resume them first.")
    ASSIGN_NO_PROFILE = "assign_no_profile", _("%(name)s has no expert profile.")
    ASSIGN_NOT_CALIBRATED = "assign_not_calibrated", _(
        "%(name)s has not passed the calibration on the current rubric version.")
    ASSIGN_LEASE_LIMIT = "assign_lease_limit", _("%(name)s already holds as many tasks as they may (%(max)s).")
    ASSIGN_WEEKLY_CAPACITY = "assign_weekly_capacity", _(
        "%(name)s has reached their weekly capacity of %(max)s tasks.")
    ASSIGN_TIER = "assign_tier", _("%(name)s's tier does not take hard tasks such as task %(task)s.")
    ASSIGN_HELD_BEFORE = "assign_held_before", _(
        "%(name)s already held task %(task)s; an expert never gets a task twice.")
    ASSIGN_TASK_FULL = "assign_task_full", _("Task %(task)s has no free slot: all its experts are drawn.")
    ASSIGN_TASK_NOT_OPEN = "assign_task_not_open", _(
        "Task %(task)s takes no assignment: it is golden, complete, or of an earlier rubric version.")
    ASSIGN_NO_TASKS = "assign_no_tasks", _("Choose at least one task of this project.")
    ASSIGN_NO_EXPERTS = "assign_no_experts", _("Name at least one expert.")
    BATCH_GOLDEN_HAS_WORK = "batch_golden_has_work", _(
        "Task %(task)s holds regular work, so it cannot become golden; nothing was changed.")
    BATCH_OVERLAP_RANGE = "batch_overlap_range", _("Overlap is a whole number from %(low)s to %(high)s.")
    BATCH_REJECT_NONE = "batch_reject_none", _("No submission matches; nothing was rejected.")
    PRIORITY_RANGE = "priority_range", _("Priority is a whole number from %(low)s to %(high)s.")

    # The expert's loop.
    LEASE_LIMIT = "lease_limit", _("You already hold as many tasks as you may; finish the one you have first.")
    AT_WEEKLY_CAPACITY = "at_weekly_capacity", _(
        "You have reached your weekly capacity of %(max)s tasks (submitted this week and in hand); new tasks "
        "come again from %(retry_at)s.")
    LEASE_LOST = "lease_lost", _("Your lease expired and the task went to another expert. Your marks stay "
                                 "on this page but can no longer be submitted.")
    LEASE_RELEASED = "lease_released", _("You gave this task back (or left the project); your marks stay on "
                                         "this page but can no longer be submitted.")
    ALREADY_SUBMITTED = "already_submitted", _("This task is already submitted; a submission is final.")
    SUBMITTED_FINAL = "submitted_final", _("This task is already submitted: a submitted task cannot be given "
                                           "back or skipped.")
    LEASE_EXPIRED = "lease_expired", _("Your time on this task has run out, so it cannot be extended. You can "
                                       "still submit while the task has a free place.")
    # Reveal after submission (annotation.reveal).
    REVEAL_NOT_SUBMITTED = "reveal_not_submitted", _(
        "Submit this task first: the judge's labels are shown only after you submit.")
    REVEAL_REJECTED = "reveal_rejected", _("This submission was rejected, so it cannot be compared or revised.")
    REVEAL_NO_JUDGE = "reveal_no_judge", _("The judge has not judged this task yet; there is nothing to compare.")
    REVEAL_ALREADY_REVISED = "reveal_already_revised", _(
        "You already revised this task once; a revision is final.")
    REVEAL_INVALID = "reveal_invalid", ngettext_lazy(
        "%(count)d change needs attention; nothing was saved.",
        "%(count)d changes need attention; nothing was saved.", "count")
    REVISION_REASON_REQUIRED = "revision_reason_required", _("Say why you change this label.")
    REVISION_REASON_TOO_LONG = "revision_reason_too_long", _("The reason is too long (at most %(max)s characters).")
    REVISION_ITEM_UNKNOWN = "revision_item_unknown", _("Not an item where your label differs from the judge's.")
    SKIP_REASON_INVALID = "skip_reason_invalid", _("Choose why you skip this task.")
    SKIP_TEXT_REQUIRED = "skip_text_required", _("With the reason “Other”, say in a few words why you skip this task.")
    SKIP_TEXT_TOO_LONG = "skip_text_too_long", _("The explanation is too long (at most %(max)s characters).")
    INVALID_LABELS = "invalid_labels", ngettext_lazy(
        "%(count)d item has no mark yet or an invalid one; nothing was saved.",
        "%(count)d items have no mark yet or an invalid one; nothing was saved.",
        "count")
    INVALID_NOTES = "invalid_notes", _("A note is too long (at most 2000 characters); nothing was saved.")
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused", _(
        "This Idempotency-Key was already used for a different request.")

    # Calibration.
    CALIBRATION_REQUIRED = "calibration_required", _(
        "Before real tasks, pass the calibration on this project's current rubric.")
    CALIBRATION_NOT_READY = "calibration_not_ready", _(
        "Calibration for the current rubric version is not ready yet: the project manager has to "
        "import more golden reference labels.")
    ALREADY_CALIBRATED = "already_calibrated", _("You have already passed calibration on this rubric version.")
    RETRY_LATER = "retry_later", _("You can retry the calibration after %(retry_at)s.")
    CALIBRATION_STALE = "calibration_stale", _(
        "The rubric changed while you were calibrating; start a new calibration.")
    CALIBRATION_FINISHED = "calibration_finished", _("This calibration attempt is finished.")
    NO_REFERENCES = "no_references", _("This calibration has no reference labels to score against.")
    INVALID_SETTINGS = "invalid_settings", _("Some settings are out of range; nothing was changed.")

    # Webhooks.
    INVALID_WEBHOOK = "invalid_webhook", _("The endpoint was not registered; check the fields marked below.")
    WEBHOOK_URL_INVALID = "webhook_url_invalid", _("Give the endpoint's URL (at most %(limit)s characters).")
    WEBHOOK_URL_REFUSED = "webhook_url_refused", _(
        "This URL is refused: it must start with https://, carry no user name or password, and not point "
        "at this machine or a private, loopback or link-local address.")
    WEBHOOK_EVENTS_INVALID = "webhook_events_invalid", _("Choose at least one of the listed events.")

    # Imports and exports.
    TOO_LARGE = "too_large", _("The file is %(size)s, over the import limit of %(limit)s; "
                               "split it into smaller files.")
    INVALID_FILE = "invalid_file", ngettext_lazy(
        "%(source)s: %(count)d error, nothing was imported. First: %(first)s",
        "%(source)s: %(count)d errors, nothing was imported. First: %(first)s",
        "count")
    INVALID_OPTION = "invalid_option", _("%(field)s: %(message)s")
    NO_VERSION = "no_version", _("The project has no published rubric version yet: import questions first.")

    # Rubric versions.
    INVALID_ITEM = "invalid_item", _("The rubric item needs attention; nothing was saved.")
    PUBLISHED_VERSION = "published_version", _("A published version never changes; edit the draft instead.")
    NO_CHANGES = "no_changes", _("The draft is identical to the published version; there is nothing to publish.")
    ALREADY_PUBLISHED = "already_published", _("This version is already published.")
    EMPTY_VERSION = "empty_version", _("A version without rubric items cannot be published.")
    REASON_REQUIRED = "reason_required", _("Give a reason; it is recorded with the change.")
    GUIDELINES_TOO_LONG = "guidelines_too_long", _(
        "The guidelines are longer than %(max)s characters; nothing was saved.")

    # Consultations.
    CONSULTATION_ITEM = "consultation_item", _("This task has no votes on that rubric item yet.")
    CONSULTATION_REASON = "consultation_reason", _("Say in a few words why (at most %(max)s characters).")
    CONSULTATION_TEXT = "consultation_text", _("Write the message (at most %(max)s characters).")
    CONSULTATION_NOT_SUBMITTED = "consultation_not_submitted", _(
        "You can ask for a consultation only on an item of a task you submitted.")
    CONSULTATION_CHOICE = "consultation_choice", _("Choose hit, miss or item is ambiguous.")
    CONSULTATION_CATEGORY = "consultation_category", _(
        "Choose a reason category: annotator error, guideline gap, ambiguous text or judge-relevant insight.")
    CONSULTATION_VOTED = "consultation_voted", _(
        "Your blind vote is already cast and cannot change; after the reveal you can give a final vote.")
    CONSULTATION_NOT_REVEALED = "consultation_not_revealed", _(
        "The votes are not revealed yet: the discussion opens once everyone has voted or the deadline passes.")
    CONSULTATION_REVEALED = "consultation_revealed", _(
        "The votes are revealed already; give your final vote instead.")
    CONSULTATION_RESOLVED = "consultation_resolved", _("This consultation is resolved; it no longer changes.")
    CONSULTATION_NOT_PARTICIPANT = "consultation_not_participant", _(
        "Only the experts asked to vote on this consultation can vote.")
    CONSULTATION_BUSY = "consultation_busy", _(
        "You still hold, or may still be given, a task of this question. This consultation opens to you "
        "once you have submitted it, so that nothing here sways your own judgement.")
    CONSULTATION_INVITEE_BUSY = "consultation_invitee_busy", _(
        "%(name)s still holds, or may still be given, a task of this question; invite them once they have "
        "submitted it.")
    SUGGESTION_TEXT = "suggestion_text", _(
        "A guideline gap needs the suggested wording of the rubric item (at most %(max)s characters).")
    SUGGESTION_ITEM_GONE = "suggestion_item_gone", _(
        "The draft has no item %(key)s any more, so the suggestion cannot be taken; dismiss it instead.")
    SUGGESTION_DECIDED = "suggestion_decided", _("This suggestion was already taken or dismissed.")

    # Judge runs.
    INVALID_RUN = "invalid_run", _("The judge run was not started; see the fields below.")
    RUN_FINISHED = "run_finished", _("The judge run has already finished.")
    NOTHING_TO_RESUME = "nothing_to_resume", _(
        "Every task of this judge run is done; there is nothing to resume.")
    IMPORTED_RUN = "imported_run", _("An imported judge run has no requests to cancel or resume.")
    BAD_URL = "bad_url", _("Enter an http(s) URL such as https://api.openai.com/v1.")
    RPS_RANGE = "rps_range", _("Enter a rate above 0 and at most %(max)s requests per second.")
    KEY_CHOICE = "key_choice", _("Give either an API key or the name of an environment variable holding it.")
    INVALID_KEY_ENV = "invalid_key_env", _(
        "An environment variable name holds only letters, digits and underscores.")
    KEY_ENV_INVALID = "key_env_invalid", _(
        "An environment variable name holds only letters, digits and underscores.")
    KEY_ENV_NOT_ALLOWED = "key_env_not_allowed", _("This environment variable may not be used for judge keys.")
    KEY_ENV_ADMIN_ONLY = "key_env_admin_only", _(
        "Keys from the server's environment are for admins; type the API key in instead.")
    KEY_ENV_NOT_GRANTED = "key_env_not_granted", _(
        "This project has no grant for the environment variable %(name)s; an admin adds one under Judge key "
        "grants in the admin site.")
    URL_NOT_ALLOWED = "url_not_allowed", _(
        "This URL points at this machine or a private network, or is not https://; give the endpoint's public "
        "https:// address.")
    NAME_TAKEN = "name_taken", _("This project already has a judge run with this name.")
    NO_TASKS = "no_tasks", _("The current rubric version has no tasks to judge yet.")
    CONFIG_VERSION_UNKNOWN = "config_version_unknown", _("Not a judge configuration version of this project.")
    CONFIG_VERSION_DIFFERS = "config_version_differs", _(
        "The chosen configuration version fixes this as %(value)s; leave the field empty or choose another "
        "version.")

    # Judge configurations, run comparison and the per-item page (annotation.judging.configs / compare).
    JUDGE_CONFIG_INVALID = "judge_config_invalid", _("The judge configuration was not saved; see the fields below.")
    JUDGE_CONFIG_NAME_TAKEN = "judge_config_name_taken", _("This project already has a judge configuration with "
                                                           "this name.")
    JUDGE_CONFIG_UNCHANGED = "judge_config_unchanged", _(
        "Nothing changed: version %(number)s already says exactly this, so no new version was written.")
    JUDGE_PROMPT_PLACEHOLDERS = "judge_prompt_placeholders", _(
        "The prompt template must contain each of %(missing)s, where the dialogue, reply, rubric lines and "
        "rubric count go.")
    TEMPERATURE_RANGE = "temperature_range", _("Enter a temperature from 0 to 2, such as 0 or 0.7.")
    PARAMS_NOT_OBJECT = "params_not_object", _(
        "Other parameters must be a JSON object, such as {\"max_tokens\": 2048}.")
    COMPARE_SAME_RUN = "compare_same_run", _("Pick two different judge runs to compare.")
    COMPARE_VERSIONS_DIFFER = "compare_versions_differ", _(
        "The two runs judged different rubric versions (v%(version_a)s and v%(version_b)s); compare runs of "
        "one version.")
    ITEM_SUGGESTION_TEXT = "item_suggestion_text", _(
        "Write the suggested wording of the rubric item (at most %(max)s characters).")

    # Money.
    PERIOD_NOT_DUE = "period_not_due", _("This period has not ended yet.")
    PERIOD_NOT_STARTED = "period_not_started", _("This period has not started yet.")
    EARLIER_PERIOD_OPEN = "earlier_period_open", _("An earlier period of this project is still open; close it first.")
    NO_OPEN_PERIOD = "no_open_period", _(
        "No period of this project is open: nothing has been earned since the last close.")
    CURRENCY_MISMATCH = "currency_mismatch", _("Entries of this period are in another currency than the project's.")
    CURRENCY_FIXED = "currency_fixed", _("The currency cannot change once prices or ledger entries exist.")
    INVALID_CURRENCY = "invalid_currency", _("Unknown currency.")
    INVALID_PERIOD_LENGTH = "invalid_period_length", _("Unknown period length; expected weekly or biweekly.")
    BATCH_NOT_DRAFT = "batch_not_draft", _("This payout batch is already approved.")
    BATCH_PAID = "batch_paid", _("This payout batch is already marked paid.")
    BATCH_NOT_APPROVED = "batch_not_approved", _("Approve the payout batch before marking it paid.")
    NOT_PAYABLE = "not_payable", _("Only submitted, paid work can be rejected.")
    ALREADY_REJECTED = "already_rejected", _("This submission is already rejected.")
    SUBMISSION_REJECTED = "submission_rejected", _("This submission was rejected; the task went to another "
                                                   "expert.")
    REJECT_REASON_UNKNOWN = "reject_reason_unknown", _("Choose a reason: spam, copy-paste, guideline violation "
                                                       "or other.")
    # Line errors of an import (`errors` entries; the field and line are shown beside them).
    LINE_BAD_ENCODING = "line_bad_encoding", _("not valid UTF-8 (byte %(byte)s at byte %(position)s of the line); "
                                       "save the file as UTF-8")
    LINE_NOT_JSON = "line_not_json", _("not valid JSON (near column %(column)s)")
    LINE_NOT_OBJECT = "line_not_object", _("expected a JSON object, got %(got)s")
    FILE_NO_ROWS = "file_no_rows", _("the file has no rows; expected one JSON object per line")
    FIELD_MISSING_TEXT = "field_missing_text", _("missing; expected a string")
    FIELD_NOT_TEXT = "field_not_text", _("expected a non-empty string, got %(got)s")
    FIELD_TOO_LONG = "field_too_long", _("expected at most %(max)s characters, got %(length)s")
    FIELD_MISSING_INTEGER_OR_NULL = "field_missing_integer_or_null", _("missing; expected an integer or null")
    FIELD_NOT_INTEGER_OR_NULL = "field_not_integer_or_null", _("expected an integer or null, got %(got)s")
    FIELD_MISSING_INTEGER = "field_missing_integer", _("missing; expected an integer")
    FIELD_NOT_INTEGER = "field_not_integer", _("expected an integer, got %(got)s")
    FIELD_OUT_OF_RANGE = "field_out_of_range", _("expected an integer between %(min)s and %(max)s, got %(got)s")
    FIELD_MISSING_LIST = "field_missing_list", _("missing; expected a non-empty list of %(what)s")
    FIELD_NOT_LIST = "field_not_list", _("expected a non-empty list of %(what)s, got %(got)s")
    FIELD_NOT_OBJECT = "field_not_object", _("expected an object, got %(got)s")
    FIELD_NOT_STRING_LIST = "field_not_string_list", _("expected a list of strings, got %(got)s")
    UNKNOWN_QUESTION = "unknown_question", _("unknown question %(question)s; import the questions first")
    DUPLICATE_QUESTION = "duplicate_question", _("duplicate question id %(question)s (first on line %(first)s)")
    UNKNOWN_DIMENSION = "unknown_dimension", _("unknown dimension %(dimension)s; expected a HeartBench dimension "
                                               "such as “温暖” or “其他”, or its code")
    BAD_DIFFICULTY = "bad_difficulty", _("expected “normal” or “hard”, got %(got)s")
    BAD_ROLE = "bad_role", _("expected %(expected)s, got %(got)s")
    LINE_NOT_BINARY = "line_not_binary", _("expected 0 or 1, got %(got)s")
    WRONG_COUNT = "wrong_count", _("expected %(expected)s values (one per rubric item), got %(got)s")
    REFERENCE_REQUIRED = "reference_required", _(
        "Give the transfer reference of the payment; nothing was marked paid.")
    INVALID_AMOUNT = "invalid_amount", _("Enter a decimal number in range, with at most four decimal places.")
    EFFECTIVE_TOO_SOON = "effective_too_soon", _(
        "A change takes effect one minute from now at the earliest; leave the field empty for that. "
        "Work already submitted keeps its price.")
    DUPLICATE_RULE = "duplicate_rule", _("A change for this already starts at that instant.")
    INVALID_DIFFICULTY = "invalid_difficulty", _("Unknown difficulty.")
    INVALID_TIER = "invalid_tier", _("Unknown tier.")

    # Project setup and lifecycle (entries of `errors` carry the setting's translated label).
    SETTING_OUT_OF_RANGE = "setting_out_of_range", _("%(label)s must be a whole number from %(low)s to %(high)s.")
    SETTING_TOO_SMALL = "setting_too_small", _("%(label)s must be a whole number of at least %(low)s.")
    LEASE_TOO_SHORT = "lease_too_short", _(
        "A lease must last at least %(minutes)s minute (%(seconds)s seconds), in whole seconds.")
    SETTING_REQUIRED = "setting_required", _("%(label)s cannot be empty.")
    SETTING_TOO_LONG = "setting_too_long", _("%(label)s is too long (at most %(limit)s characters).")
    SETTING_CHOICE = "setting_choice", _("%(label)s: choose one of the offered values.")
    SETTING_BAD_DATE = "setting_bad_date", _("%(label)s must be a date such as 2026-12-31, or empty.")
    UNKNOWN_SETTING = "unknown_setting", _("%(name)s is not a setting that can be changed here.")
    PROJECT_PAUSED = "project_paused", _("This project is paused: no new tasks are handed out for now. "
                                         "A task you already hold can still be submitted.")
    PROJECT_CLOSED = "project_closed", _("This project is closed: it is read-only. Exports and reports "
                                         "still work.")
    PROJECT_NOT_CLOSED = "project_not_closed", _("Only a closed project can be archived; close it first.")

    # Dataset exports.
    EXPORT_FILTER_INVALID = "export_filter_invalid", _(
        "Unknown value %(got)s for the export filter %(field)s; expected %(expected)s.")
    EXPORT_EXPIRED = "export_expired", _("This export expired at %(expired)s; build it again from the export page.")
    EXPORT_NOT_READY = "export_not_ready", _("This export is not ready yet (%(status)s).")

    # The case library and the FAQ.
    LIBRARY_FIELD_REQUIRED = "library_field_required", _("Fill in the required fields; nothing was saved.")
    LIBRARY_FIELD_TOO_LONG = "library_field_too_long", _(
        "A field is too long (at most %(max)s characters); nothing was saved.")
    LIBRARY_ITEM_UNKNOWN = "library_item_unknown", _("No rubric item %(name)s in this project.")
    LIBRARY_QUESTION_UNKNOWN = "library_question_unknown", _("No question %(name)s in this project.")
    LIBRARY_DIMENSION_UNKNOWN = "library_dimension_unknown", _("Unknown dimension %(name)s.")
    LIBRARY_OUTCOME_UNKNOWN = "library_outcome_unknown", _("Unknown outcome %(name)s; expected hit, miss or ambiguous.")
    CASE_CONSULTATION_UNRESOLVED = "case_consultation_unresolved", _(
        "Only a resolved consultation can become a case: resolve it first.")
    CASE_CONSULTATION_TAKEN = "case_consultation_taken", _("This consultation is already a case in the library.")
    FAQ_ANSWER_NOT_ALLOWED = "faq_answer_not_allowed", _(
        "Only gold and platinum experts and the project's managers answer questions.")

    # Appeals (payments.appeals).
    APPEAL_WINDOW_CLOSED = "appeal_window_closed", _(
        "The time to contest this ended on %(deadline)s: this project allows %(days)s days.")
    APPEAL_EXISTS = "appeal_exists", _("This was contested already; an appeal is decided once and its decision "
                                       "is final.")
    APPEAL_REASON_REQUIRED = "appeal_reason_required", _("Say why you contest this.")
    APPEAL_REASON_TOO_LONG = "appeal_reason_too_long", _("The reason is too long (at most %(limit)s characters).")
    APPEAL_NOT_CONTESTABLE = "appeal_not_contestable", _(
        "Only a rejection of your submission or an earning on your statement can be contested.")
    APPEAL_USE_REJECTION = "appeal_use_rejection", _(
        "This deduction comes from a rejection: contest the rejection itself, from your history.")
    APPEAL_OWN_REJECTION = "appeal_own_rejection", _(
        "You rejected this submission, so another project manager or a senior expert decides its appeal.")
    APPEAL_ALREADY_DECIDED = "appeal_already_decided", _("This appeal was decided already: %(status)s.")
    APPEAL_OUTCOME_UNKNOWN = "appeal_outcome_unknown", _("Choose whether to accept or deny the appeal.")
    APPEAL_DECISION_REASON_REQUIRED = "appeal_decision_reason_required", _(
        "Give the reason for your decision; the expert reads it.")
    APPEAL_AMOUNT_INVALID = "appeal_amount_invalid", _(
        "The amount must be more than 0 and at most %(max)s %(currency)s.")
    RESTORED_ON_APPEAL = "restored_on_appeal", _("This submission was restored on appeal; it cannot be rejected "
                                                 "again.")


    # Review of submissions (annotation.review).
    REVIEW_DONE = "review_done", _("This submission was already reviewed; nothing changed.")
    REVIEW_COMMENT_REQUIRED = "review_comment_required", _("Tell the expert what to fix: the comment is required.")
    RETURN_ONCE = "return_once", _("This submission was returned once already; accept or reject it now.")
    RETURN_NOT_SUBMITTED = "return_not_submitted", _("Only a submitted task can be returned to its expert.")
    RETURNED_TO_FIX = "returned_to_fix", _("This task was returned to you to fix: submit it again, or leave it "
                                           "and your first submission stands when the time runs out.")


GENERIC_CODES = frozenset({ErrorCode.INVALID, ErrorCode.CONFLICT, ErrorCode.FORBIDDEN})
