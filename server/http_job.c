/* http_job.c - a job request's body once it has arrived: decoded and parsed (on the HTTP thread
 * for a small plain body, else on a parse thread while the connection is suspended), its reply's
 * room reserved in --max-unsent-bytes, run at once when tiny or handed to the workers, and its
 * result settled and answered when the connection resumes. http.c calls in at the body's end
 * (http_body_complete) and at the resume (http_job_result). */
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "http_internal.h"

/* A job's result, on the thread that computed it: the reply's reservation comes down to the
 * capacity of the buffer that holds it (all of it, when the job ended in an error: error bodies
 * are not counted). A buffer larger than the reservation (never, as api_job_respond sizes it)
 * must fit the budget for the rest, else the reply is replaced by 503 reply_budget. */
static void job_settle(http_req *r) {
    srv_job *sj = &r->sj;
    srv_http *h = r->h;
    /* A v2 reply: its JSON part's length, then the coding the client accepts (here, where the
     * job ran: a worker, or for a tiny job the thread that parsed it). The coded copy is held
     * beside the reply for a moment in the job memory budget, and the reply goes uncoded when
     * it does not fit there; kept, it is smaller than the buffer it replaces. */
    if (sj->status == 200 && !sj->body.failed && r->route == SRV_ROUTE_V2_INFER) {
        r->json_len = sj->body.len - (r->binary_bytes < sj->body.len ? r->binary_bytes : 0);
        if (srv_coding_encode(r->reply_coding, &sj->body, h->limits.mem))
            r->content_encoding = srv_coding_name(r->reply_coding);
    }
    http_job_hold(r);
}

void http_job_hold(http_req *r) {
    srv_job *sj = &r->sj;
    srv_http *h = r->h;
    size_t held = sj->status == 200 && !sj->body.failed ? sj->body.cap : 0;
    if (held <= r->unsent) {
        http_unsent_release(h, r, r->unsent - held);
    } else if (!http_unsent_reserve(h, r, held - r->unsent)) {
        api_error e = {0};
        api_fail(&e, 503, "reply_budget", NULL,
                 "the reply of %zu bytes was computed, but replies waiting for their clients "
                 "fill the budget of %zu bytes (--max-unsent-bytes); retry shortly",
                 sj->body.len, h->cfg->max_unsent_bytes);
        srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
        http_unsent_release(h, r, r->unsent);
        api_buf_free(&sj->body);
        api_error_body(&e, &sj->body);
        sj->status = (unsigned)e.status;
        sj->error = e;
        snprintf(sj->code, sizeof sj->code, "%s", e.code);
    }
}

/* A worker's result: settled, then the suspended connection resumes to send it, and the
 * requests that shared the job resume with their copies. */
static void on_job_done(srv_job *sj) {
    http_req *r = sj->owner;
    job_settle(r);
    http_share_settle(r->h, r);
    pthread_mutex_lock(&r->mu);
    MHD_resume_connection(r->conn);
    pthread_mutex_unlock(&r->mu);
    http_req_unref(r);
}

/* A job's answer without a job: r->sj holds err as the workers would leave it, for
 * on_job_result to send (v1's error body, or the Open Inference Protocol's from sj.error). */
static void job_answer_error(http_req *r, const api_error *e) {
    srv_job *sj = &r->sj;
    api_buf_free(&sj->body);
    sj->status = e->status ? (unsigned)e->status : 500;
    sj->error = *e;
    sj->error.status = (int)sj->status;
    snprintf(sj->code, sizeof sj->code, "%s", e->code);
    api_error_body(e, &sj->body);
}

typedef enum admit_rc {
    ADMIT_ANSWERED = 0, /* r->sj holds the answer (an error, or a tiny job run here) */
    ADMIT_QUEUED,       /* a worker has the job; its done() resumes the connection */
} admit_rc;

/* POST /v1/sessions: the session opened here (no worker computes anything: the body's
 * parameters are decoded into the session's block), answered 201 with its Location. */
static admit_rc session_open(srv_http *h, http_req *r, const char *text, size_t len);

/* The body has arrived whole: decodes it (srv_body_finish), parses it into a job, reserves its
 * reply's room, and runs it here when it is tiny, else queues it for the workers. Runs on the
 * HTTP thread for a small plain body, else on a parse thread. The caller holds a reference for
 * the worker (kept by it when ADMIT_QUEUED). suspend: the connection is not suspended yet, and
 * must be, under r->mu, as the job is queued (the HTTP thread's case). */
static admit_rc job_admit(srv_http *h, http_req *r, bool suspend) {
    api_error e = {0};
    switch (srv_body_finish(r->body)) {
    case SRV_BODY_OK:
        break;
    case SRV_BODY_OVER:
        if (r->coding != SRV_CODING_IDENTITY)
            api_fail(&e, 413, "body_too_large", NULL,
                     "the %s request body decoded to more than the limit of %zu bytes "
                     "(--max-body-bytes)",
                     srv_coding_name(r->coding), h->cfg->max_body_bytes);
        else
            api_fail(&e, 413, "body_too_large", NULL,
                     "the request body is over the limit of %zu bytes (--max-body-bytes)",
                     h->cfg->max_body_bytes);
        break;
    case SRV_BODY_BAD:
        api_fail(&e, 400, "invalid_encoding", NULL, "%s (Content-Encoding: %s)",
                 srv_body_error(r->body), srv_coding_name(r->coding));
        break;
    case SRV_BODY_BUDGET:
        srv_metrics_reject(h->metrics, SRV_REJECT_MEMORY_BUDGET);
        api_fail(&e, 503, "memory_budget", NULL,
                 "the memory attnd may hold for requests (--max-memory) is taken; retry shortly");
        break;
    case SRV_BODY_OOM:
        api_fail(&e, 503, "out_of_memory", NULL,
                 "no memory to hold the request body now; retry later");
        break;
    }
    if (e.status) {
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    if (atomic_load(&h->draining)) {
        srv_metrics_reject(h->metrics, SRV_REJECT_DRAINING);
        api_fail(&e, 503, "draining", NULL,
                 "attnd is shutting down and takes no new jobs; retry on another instance");
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    if (http_unsent_full(h)) {
        srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
        api_fail(&e, 503, "reply_budget", NULL,
                 "replies reserved or waiting for their clients to read them fill the budget of "
                 "%zu bytes (--max-unsent-bytes); retry shortly",
                 h->cfg->max_unsent_bytes);
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    /* The same request is queued already: this one waits for its result (http_share.c). */
    if (http_share_join(h, r, suspend))
        return ADMIT_QUEUED;
    api_op op = r->route == SRV_ROUTE_SDPA ? API_OP_SDPA : API_OP_ATTENTION;
    size_t len;
    const char *text = srv_body_data(r->body, &len);
    if (r->route == SRV_ROUTE_SESSIONS)
        return session_open(h, r, text, len);
    double t0 = srv_now();
    api_job *job = r->route == SRV_ROUTE_V2_INFER
                       ? api_v2_parse(text, len, r->v2_header_len, r->model, r->version, h->models,
                                      &h->limits, h->sessions, r->key, &e)
                   : r->route == SRV_ROUTE_SESSION
                       ? api_session_append(h->sessions, r->key, r->session_id, text, len,
                                            h->models, &h->limits, &e)
                       : api_job_parse(op, text, len, h->models, &h->limits, &e);
    r->parse_ms = (srv_now() - t0) * 1e3;
    op = api_job_op(job);
    if (job) { /* (a v2 request's model is known from its path, routes.c) */
        r->sj.model = api_job_model_index(job, h->models);
        srv_metrics_parse(h->metrics, op, r->sj.model, r->parse_ms * 1e-3);
    }
    r->binary_bytes = api_job_binary_bytes(job);
    srv_body *body = r->body; /* kept until the job is queued: a leader's key (http_share.c) */
    r->body = NULL;
    if (!job) {
        srv_body_destroy(body);
        if (!e.status)
            api_fail(&e, 500, "internal", NULL, "the job could not be parsed");
        if (!strcmp(e.code, "memory_budget"))
            srv_metrics_reject(h->metrics, SRV_REJECT_MEMORY_BUDGET);
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    /* The reply's room in the budget, before the job is queued and computed. */
    size_t reply_max = api_job_response_bytes(job), max = h->cfg->max_unsent_bytes;
    reply_max = reply_max > SIZE_MAX - API_RESPOND_SLACK ? SIZE_MAX : reply_max + API_RESPOND_SLACK;
    if (reply_max > max) {
        api_job_destroy(job);
        srv_body_destroy(body);
        api_fail(&e, 413, "job_too_large", NULL,
                 "the reply can take up to %zu bytes, over the budget for unsent replies of %zu "
                 "bytes (--max-unsent-bytes); ask for less (%s)",
                 reply_max, max,
                 r->route == SRV_ROUTE_V2_INFER ? "need_weights, weights_top_k, binary_data_output"
                                                : "need_weights, \"encoding\": \"base64\"");
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    if (!http_unsent_reserve(h, r, reply_max)) {
        api_job_destroy(job);
        srv_body_destroy(body);
        srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
        api_fail(&e, 503, "reply_budget", NULL,
                 "the reply can take up to %zu bytes, and the replies reserved or waiting for "
                 "their clients fill the budget of %zu bytes (--max-unsent-bytes); retry shortly",
                 reply_max, max);
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }

    r->sj.job = job;
    r->sj.op = op;
    /* The queue deadline: --request-timeout from arrival, or the request's own timeout (v2's
     * timeout parameter) when that is sooner. */
    double own = api_job_timeout(job);
    r->sj.own_deadline = own > 0 && own < h->cfg->request_timeout;
    r->sj.deadline = r->t_start + (r->sj.own_deadline ? own : h->cfg->request_timeout);
    r->sj.done = on_job_done;
    /* A tiny job runs here and now when no job waits (--inline-max-flops): no hand-off to a
     * worker, no suspend and resume. */
    int rc = srv_workers_run_inline(h->workers, &r->sj);
    if (rc == SRV_OK) {
        srv_body_destroy(body);
        job_settle(r);
        return ADMIT_ANSWERED;
    }
    /* Queued: identical requests that arrive until it is settled share it (http_share.c); never
     * a session's append, which changes the session: each identical one appends its own rows
     * (and as none leads, none can be joined either: a follower's body equals its leader's). */
    if (api_job_stateful(job) || !http_share_lead(h, r, body, reply_max))
        srv_body_destroy(body);
    if (suspend)
        pthread_mutex_lock(&r->mu);
    rc = rc == SRV_CLOSED ? rc : srv_workers_submit(h->workers, &r->sj);
    if (rc == SRV_OK && suspend) {
        MHD_suspend_connection(r->conn);
        r->state = REQ_QUEUED;
    }
    if (suspend)
        pthread_mutex_unlock(&r->mu);
    if (rc == SRV_OK)
        return ADMIT_QUEUED;

    /* Not taken: undo, and say why. */
    api_job_destroy(job);
    r->sj.job = NULL;
    http_unsent_release(h, r, r->unsent);
    if (rc == SRV_QUEUE_FULL) {
        srv_metrics_reject(h->metrics, SRV_REJECT_QUEUE_FULL);
        api_fail(&e, 503, "queue_full", NULL,
                 "all %zu places of the job queue are taken (--max-queue); retry shortly",
                 h->cfg->max_queue);
    } else {
        srv_metrics_reject(h->metrics, SRV_REJECT_DRAINING);
        api_fail(&e, 503, "draining", NULL,
                 "attnd is shutting down and takes no new jobs; retry on another instance");
    }
    job_answer_error(r, &e);
    http_share_settle(h, r); /* the requests that joined it get the same answer */
    return ADMIT_ANSWERED;
}

static admit_rc session_open(srv_http *h, http_req *r, const char *text, size_t len) {
    api_error e = {0};
    srv_job *sj = &r->sj;
    double t0 = srv_now();
    int rc = api_session_open(h->sessions, r->key, text, len, h->models, &h->limits, &sj->body, &e);
    r->parse_ms = (srv_now() - t0) * 1e3;
    srv_body_destroy(r->body);
    r->body = NULL;
    if (rc != 0) {
        if (!strcmp(e.code, "memory_budget"))
            srv_metrics_reject(h->metrics, SRV_REJECT_MEMORY_BUDGET);
        job_answer_error(r, &e);
        return ADMIT_ANSWERED;
    }
    /* {"id":"<32 hex digits>",...: the id is at bytes 7 to 38 of the body */
    snprintf(r->location, sizeof r->location, "/v1/sessions/%.32s", sj->body.data + 7);
    sj->status = 201;
    return ADMIT_ANSWERED;
}

/* On a parse thread: the body decoded and parsed, the job admitted; the connection, suspended
 * by the HTTP thread, resumes now unless a worker has the job (its done() resumes it). */
static void on_parse_task(srv_task *task) {
    http_req *r = (http_req *)(void *)((char *)task - offsetof(http_req, task));
    if (job_admit(r->h, r, false) == ADMIT_QUEUED)
        return; /* the task's reference is the worker's now */
    pthread_mutex_lock(&r->mu);
    MHD_resume_connection(r->conn);
    pthread_mutex_unlock(&r->mu);
    http_req_unref(r);
}

/* The body has arrived whole. A small one sent without a coding is parsed here, on the HTTP
 * thread (a fraction of a millisecond: SRV_INLINE_PARSE_BYTES); any other is decoded and parsed
 * on a parse thread while the connection is suspended, so that this thread goes on serving the
 * others. */
enum MHD_Result http_body_complete(srv_http *h, http_req *r) {
    srv_conn_set(h->conns, r->track, SRV_CONN_ARRIVED);
    atomic_fetch_add(&r->refs, 1); /* a worker's or the parse thread's */
    if (r->coding == SRV_CODING_IDENTITY && r->bytes_in <= SRV_INLINE_PARSE_BYTES) {
        if (job_admit(h, r, true) == ADMIT_QUEUED)
            return MHD_YES;
        atomic_fetch_sub(&r->refs, 1);
        return http_job_result(r);
    }
    r->task.fn = on_parse_task;
    pthread_mutex_lock(&r->mu);
    int rc = srv_tasks_submit(h->parsers, &r->task);
    if (rc == SRV_OK) {
        MHD_suspend_connection(r->conn);
        r->state = REQ_QUEUED;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == SRV_OK)
        return MHD_YES;
    atomic_fetch_sub(&r->refs, 1);
    if (rc == SRV_QUEUE_FULL) {
        srv_metrics_reject(h->metrics, SRV_REJECT_QUEUE_FULL);
        return http_reply_error(r, 503, "queue_full",
                                "all %zu places of the queue of bodies waiting to be parsed are "
                                "taken (--max-queue); retry shortly",
                                h->cfg->max_queue);
    }
    return http_reply_unavailable(r);
}

enum MHD_Result http_job_result(http_req *r) {
    srv_job *sj = &r->sj;
    if (sj->status != 200 && http_v2_path(r->path)) { /* the error in the protocol's form */
        api_buf_free(&sj->body);
        return http_reply_api_error(r, &sj->error);
    }
    if (sj->status != 200)
        snprintf(r->code, sizeof r->code, "%s", sj->code);
    return http_reply_buf(r, sj->status,
                          r->binary_bytes ? "application/octet-stream" : "application/json",
                          &sj->body);
}
