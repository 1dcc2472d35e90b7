"""The workload image's Containerfile: the wheelhouse's wheels installed onto a base image (dltestbed's
Debian root filesystem or one the user names), run as an unprivileged user. Two forms of one image: in cached
stages for a builder with no mounts (Docker's legacy builder), in one stage where the builder binds the wheels into
the RUN that installs them (Podman's; buildah leaves the empty mount points /tmp/deps, /tmp/more and
/tmp/dltestbed in its layer). The image build fills the runtime's in, and hashes both among the inputs that tag the
image (a tag names the same inputs whichever runtime built it).
"""

_AS_USER = """\
RUN (getent group dltestbed || groupadd --gid 10001 dltestbed) \\
 && (id dltestbed || useradd --uid 10001 --gid 10001 --create-home --shell /bin/sh dltestbed)
USER 10001:10001
WORKDIR /home/dltestbed
ENV PATH=/opt/dltestbed/venv/bin:/usr/local/bin:/usr/bin:/bin HOME=/home/dltestbed
LABEL org.dltestbed.inputs="{inputs}"
"""  # both images end so: run as an unprivileged user, tagged by their inputs

CONTAINERFILE = (
    """\
# written by dltestbed: the workload image. Multi-stage: no wheel is kept in a layer, and the builder caches the
# dependencies' stages (deps/: the default framework's, shared by every image; more/: another framework's).
FROM {base} AS deps
COPY deps/ /tmp/deps/
RUN python3 -m venv /opt/dltestbed/venv \\
 && /opt/dltestbed/venv/bin/pip install --no-index --no-compile --find-links /tmp/deps -r /tmp/deps/requirements.txt

FROM deps AS more
COPY more/ /tmp/more/
RUN if [ -s /tmp/more/requirements.txt ]; then /opt/dltestbed/venv/bin/pip install --no-index --no-compile \\
    --find-links /tmp/more --find-links /tmp/deps -r /tmp/more/requirements.txt; fi

FROM more AS install
LABEL {stage_label}="install"
COPY dltestbed/ /tmp/dltestbed/
RUN /opt/dltestbed/venv/bin/pip install --no-index --no-deps /tmp/dltestbed/{wheel} \\
 && /opt/dltestbed/venv/bin/python -c '{imports}'

FROM {base}
COPY --from=install /opt/dltestbed/venv /opt/dltestbed/venv
"""
    + _AS_USER
)

ONE_STAGE = (
    """\
# written by dltestbed: the workload image, one stage. The wheels are bound into the RUN that installs them (never
# kept in a layer) and the venv is one layer, made where it stays: no copy of it between stages. Buildah caches a RUN
# with mounts by its text alone, not by what is bound, so the text carries the inputs' hash.
FROM {base}
RUN --mount=type=bind,source=deps,target=/tmp/deps --mount=type=bind,source=more,target=/tmp/more \\
    --mount=type=bind,source=dltestbed,target=/tmp/dltestbed \\
    : inputs {inputs} \\
 && python3 -m venv /opt/dltestbed/venv \\
 && /opt/dltestbed/venv/bin/pip install --no-index --no-compile --find-links /tmp/deps -r /tmp/deps/requirements.txt \\
 && if [ -s /tmp/more/requirements.txt ]; then /opt/dltestbed/venv/bin/pip install --no-index --no-compile \\
    --find-links /tmp/more --find-links /tmp/deps -r /tmp/more/requirements.txt; fi \\
 && /opt/dltestbed/venv/bin/pip install --no-index --no-deps /tmp/dltestbed/{wheel} \\
 && /opt/dltestbed/venv/bin/python -c '{imports}'
"""
    + _AS_USER
)
