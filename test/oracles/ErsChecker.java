// An RFC 4998 evidence record checked by BouncyCastle's org.bouncycastle.tsp.ers (an implementation we did not
// write): the record parses (ERSEvidenceRecord), the data object is present at the given time
// (validatePresent over ERSByteData: its hash in the first partial hash tree, the reduced hash tree leading to
// the time-stamp's imprint), and the time-stamp token's signature verifies with the TSA certificate it carries.
//
//   java -cp bcprov.jar:bcpkix.jar:bcutil.jar ErsChecker.java RECORD.ers DATA-OBJECT... [ISO-8601 time]
//
// Several data objects are checked as one data group (ERSDataGroup, RFC 4998 4.2).
//
// Prints "valid" and exits 0, or "invalid: <reason>" and exits 1.
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.Security;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cms.jcajce.JcaSimpleSignerInfoVerifierBuilder;
import org.bouncycastle.jce.provider.BouncyCastleProvider;
import org.bouncycastle.operator.DigestCalculatorProvider;
import org.bouncycastle.operator.jcajce.JcaDigestCalculatorProviderBuilder;
import org.bouncycastle.tsp.ers.ERSByteData;
import org.bouncycastle.tsp.ers.ERSData;
import org.bouncycastle.tsp.ers.ERSDataGroup;
import org.bouncycastle.tsp.ers.ERSEvidenceRecord;

public class ErsChecker {
    public static void main(String[] args) throws Exception {
        Security.addProvider(new BouncyCastleProvider());
        byte[] record = Files.readAllBytes(Path.of(args[0]));
        boolean timed = args.length > 2 && args[args.length - 1].matches("\\d{4}-\\d{2}-\\d{2}T.*");
        Date at = timed ? Date.from(Instant.parse(args[args.length - 1])) : new Date();
        List<ERSData> objects = new ArrayList<>();
        for (int i = 1; i < args.length - (timed ? 1 : 0); i++)
            objects.add(new ERSByteData(Files.readAllBytes(Path.of(args[i]))));
        ERSData data = objects.size() == 1 ? objects.get(0) : new ERSDataGroup(objects);
        try {
            DigestCalculatorProvider digests = new JcaDigestCalculatorProviderBuilder().setProvider("BC").build();
            ERSEvidenceRecord evidence = new ERSEvidenceRecord(record, digests);
            evidence.validatePresent(data, at);
            X509CertificateHolder tsa = evidence.getSigningCertificate();
            if (tsa == null) throw new IllegalStateException("the time-stamp carries no TSA certificate");
            evidence.validate(new JcaSimpleSignerInfoVerifierBuilder().setProvider("BC").build(tsa));
            System.out.println("valid");
        } catch (Exception e) {
            System.out.println("invalid: " + e);
            System.exit(1);
        }
    }
}
