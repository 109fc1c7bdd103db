-- The ERP of the ERP story, simulated in the same database, made anew: the
-- story of make run (test/demo/erp-story.sh) and the Python package's
-- (clients/python/examples/erp_story.py) load it.  erp_create_invoice()
-- takes its time (pg_sleep) and then writes an invoice; a call cancelled while
-- it sleeps has drawn its invoice number all the same.  Its objects go into
-- public by name: holdcommit's schema, first on the search_path of make run's
-- database, is the extension's alone.
SET client_min_messages = warning;
DROP TABLE IF EXISTS public.erp_invoices;
DROP SEQUENCE IF EXISTS public.erp_invoice_seq;
CREATE TABLE public.erp_invoices (
    invoice_no  text PRIMARY KEY,
    payment_id  text NOT NULL,      -- no UNIQUE: the ERP would gladly make a second one
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE SEQUENCE public.erp_invoice_seq;
CREATE OR REPLACE FUNCTION public.erp_create_invoice(payment text, takes interval) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    no text := 'INV-' || lpad(nextval('public.erp_invoice_seq')::text, 6, '0');
BEGIN
    PERFORM pg_sleep(extract(epoch FROM takes));
    INSERT INTO public.erp_invoices (invoice_no, payment_id) VALUES (no, payment);
    RETURN no;
END
$$;

-- The shop's own row of the payment, where the application records the
-- invoice, fenced by the lease's token (hc_lock_check in its transaction).
DROP TABLE IF EXISTS public.payments;
CREATE TABLE public.payments (
    id          text PRIMARY KEY,
    invoice_no  text,
    fenced_by   bigint              -- the token the invoice was written under
);
