# plotly.js's cartesian bundle, from npm by the lock's hash (package-lock.json), into static/vendor/.
FROM node:20-slim AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel error && npm run --silent build

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PORTAL_MODE=production
WORKDIR /app
# The lock pins every package with its hashes; it is installed in a layer of its own, so a code change reuses it.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock
COPY . .
COPY --from=assets /assets/static/vendor static/vendor
RUN pip install --no-cache-dir --no-deps --no-build-isolation . && useradd --system --uid 10001 portal \
    && SECRET_KEY=build DATABASE_URL=sqlite:////tmp/build.sqlite3 ALLOWED_HOSTS=build \
       python manage.py collectstatic --noinput
USER 10001
EXPOSE 8000
CMD ["gunicorn", "-c", "gunicorn.conf.py", "config.wsgi:application"]
