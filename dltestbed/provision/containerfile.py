"""The workload image's Containerfile: the wheelhouse's wheels installed onto a base image (dltestbed's
Debian root filesystem or one the user names) in cached stages, run as an unprivileged user. The image
build fills it in, and hashes it among the inputs that tag the image.
"""

CONTAINERFILE = """\
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
RUN (getent group dltestbed || groupadd --gid 10001 dltestbed) \\
 && (id dltestbed || useradd --uid 10001 --gid 10001 --create-home --shell /bin/sh dltestbed)
USER 10001:10001
WORKDIR /home/dltestbed
ENV PATH=/opt/dltestbed/venv/bin:/usr/local/bin:/usr/bin:/bin HOME=/home/dltestbed
LABEL org.dltestbed.inputs="{inputs}"
"""
