from django import forms

from . import cluster_parts, selectors
from .choices import Role, TeamState
from .models import Cluster, Team


class TeamCreateForm(forms.ModelForm):
    """Labels, help texts and the slug rules come from the model; the service validates again when it saves."""

    class Meta:
        model = Team
        fields = ["slug", "name", "cost_center", "idp_group", "parent"]
        labels = {"cost_center": "Cost centre", "idp_group": "Identity-provider group", "parent": "Department"}

    def __init__(self, *args, parents=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["parent"].queryset = parents if parents is not None else Team.objects.none()
        self.fields["parent"].empty_label = "— none —"
        self.fields["slug"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, widget=forms.TextInput(attrs={"autocomplete": "off"}))
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)

    def clean_username(self):
        username = self.cleaned_data["username"].strip()
        user = selectors.active_user_named(username)
        if user is None:
            raise forms.ValidationError(f"There is no active user named “{username}”.")
        self.user = user
        return username


class MemberRoleForm(forms.Form):
    username = forms.CharField(max_length=150, widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=Role.choices)


class MemberRemoveForm(forms.Form):
    username = forms.CharField(max_length=150, widget=forms.HiddenInput)


class TeamStateForm(forms.Form):
    state = forms.ChoiceField(choices=TeamState.choices)


class NamespaceDeletionForm(forms.Form):
    confirmation = forms.CharField(
        max_length=63, label="Type the team's slug to confirm",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class AccessTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What it is for, e.g. 'training notebook'.")
    expires_in_days = forms.TypedChoiceField(
        coerce=int, empty_value=None, required=False, initial="90", label="Expires",
        choices=[("7", "in 7 days"), ("30", "in 30 days"), ("90", "in 90 days"), ("366", "in a year"),
                 ("", "never")],
    )
    access = forms.ChoiceField(choices=[("write", "read and write"), ("read", "read only")], initial="write",
                               required=False,
                               label="Access", help_text="Read only: lists, status, logs, usage; no submit or cancel.")
    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.none(), required=False, label="Teams", widget=forms.CheckboxSelectMultiple,
        help_text="Limit it to these teams (none ticked: all your teams). A limited token never acts as a "
                  "platform admin.")

    def __init__(self, *args, teams=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["teams"].queryset = teams if teams is not None else Team.objects.none()


class ClusterForm(forms.ModelForm):
    """What a platform admin decides when registering a cluster; internal state (generation, sync) stays hidden."""

    server = forms.URLField(required=False, assume_scheme="https", label="API server URL (sandbox)",
                            help_text="API server URL of a sandbox cluster.")

    class Meta:
        model = Cluster
        fields = ["name", "display_name", "scheduler", "connection", "server", "context", "cohort", "overcommit",
                  "topology_levels"]
        labels = {"display_name": "Display name", "server": "API server URL (sandbox)",
                  "context": "Kubeconfig context", "cohort": "Kueue cohort / Volcano parent queue",
                  "overcommit": "Overcommit ratio", "topology_levels": "Topology levels (JSON)"}
        help_texts = {"name": "Lowercase letters, digits and '-': it names the cluster in URLs, jobs and the API.",
                      "connection": "How the portal reaches the API server. Test it before saving."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})
        # What other apps keep for a cluster (its Prometheus URL, billing's), asked before the topology levels.
        self.fields.update(cluster_parts.form_fields(registration=True))
        self.order_fields([*self.Meta.fields[:-1], *cluster_parts.field_names(registration=True)])

    def clean_topology_levels(self):
        return self.cleaned_data.get("topology_levels") or []  # left empty: no levels

    def clean(self):
        data = super().clean()
        connection = data.get("connection")
        if connection == "sandbox" and not data.get("server"):
            self.add_error("server", "A sandbox cluster needs its API server URL.")
        if connection == "kubeconfig" and not data.get("context"):
            self.add_error("context", "Name the kubeconfig context to use.")
        return data

    def connection_fields(self) -> dict:
        """The cluster's own fields: enough to try the connection."""
        return {k: self.cleaned_data[k] for k in self.Meta.fields}

    def registration_fields(self) -> dict:
        return {**self.connection_fields(),
                **{k: self.cleaned_data[k] for k in cluster_parts.field_names(registration=True)}}
