from django.db import migrations, models

from portal.naming import dns1035_name, dns_name


def keep_names_given_before(apps, schema_editor):
    """Jobs whose objects were named by the earlier rule (name-id, up to 52 characters) keep that name, so the
    status sync and cancel still find their objects; every other job derives its name as the model does."""
    Job = apps.get_model("jobs", "Job")
    changed = []
    for job in Job.objects.only("pk", "name").iterator(chunk_size=2000):
        earlier = dns_name(job.name, str(job.pk), limit=52)
        if earlier != dns1035_name(job.name, str(job.pk), limit=47):  # the rule of jobs.manifests
            job.kept_object_name = earlier
            changed.append(job)
    Job.objects.bulk_update(changed, ["kept_object_name"], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_job_team_newest_first_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="kept_object_name",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="The name its objects were given under an earlier naming rule; empty when derived as today.",
                max_length=63,
            ),
        ),
        migrations.RunPython(keep_names_given_before, migrations.RunPython.noop),
    ]
